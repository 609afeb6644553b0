import math

import pytest

from stackmatrix.stats.tdist import incomplete_beta, t_cdf, t_ppf


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        # Printed tables of Student's t (two-sided 95% and 99%, one-sided 80%).
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 4, 2.776),
        (0.975, 8, 2.306),
        (0.975, 30, 2.042),
        (0.995, 5, 4.032),
        (0.8, 8, 0.889),
        (0.975, math.inf, 1.960),
    ],
)
def test_t_quantiles_match_tables(p, df, expected):
    assert t_ppf(p, df) == pytest.approx(expected, abs=1e-3)


def test_quantile_inverts_cdf_for_fractional_df():
    for df in (1.3, 2.7, 7.9, 55.5):
        for p in (0.6, 0.9, 0.99):
            assert t_cdf(t_ppf(p, df), df) == pytest.approx(p, abs=1e-9)
    assert t_ppf(0.1, 3) == pytest.approx(-t_ppf(0.9, 3))


def test_incomplete_beta_known_values():
    assert incomplete_beta(1, 1, 0.3) == pytest.approx(0.3)
    assert incomplete_beta(2, 3, 0.4) + incomplete_beta(3, 2, 0.6) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="quantile probability"):
        t_ppf(1.0, 3)
