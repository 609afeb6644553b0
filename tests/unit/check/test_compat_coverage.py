from __future__ import annotations

import pytest

from stackmatrix.check import coverage
from stackmatrix.check.fatbin import FatbinEntry, Kind, Variant


def entry(kind: Kind, sm: int, variant: Variant = "") -> FatbinEntry:
    return FatbinEntry(
        kind=kind,
        sm=sm,
        variant=variant,
        flags=0,
        header_size=64,
        size=0,
        compressed=False,
        compression=None,
        uncompressed_size=0,
        raw_kind=0,
    )


def judge(entries: list[FatbinEntry], target: str) -> str:
    return coverage.judge(entries, coverage.parse_target(target))


@pytest.mark.parametrize(
    ("text", "major", "minor"),
    [
        ("sm_120", 12, 0),
        ("sm_90a", 9, 0),
        ("compute_86", 8, 6),
        ("100", 10, 0),
        ("12.1", 12, 1),
        ("sm_103f", 10, 3),
    ],
)
def test_parse_target(text: str, major: int, minor: int) -> None:
    t = coverage.parse_target(text)
    assert (t.major, t.minor) == (major, minor)


def test_parse_target_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a GPU arch"):
        coverage.parse_target("hopper")


def test_plain_cubin_same_major_higher_minor() -> None:
    assert judge([entry("cubin", 80)], "sm_86") == "native"
    assert judge([entry("cubin", 86)], "sm_80") == "none"
    assert judge([entry("cubin", 80)], "sm_90") == "none"
    assert judge([entry("cubin", 120)], "sm_121") == "native"


def test_arch_specific_cubin_only_exact() -> None:
    assert judge([entry("cubin", 90, "a")], "sm_90") == "native"
    assert judge([entry("cubin", 100, "a")], "sm_103") == "none"
    assert judge([entry("cubin", 120, "a")], "sm_121") == "none"


def test_family_cubin_within_family() -> None:
    assert judge([entry("cubin", 100, "f")], "sm_103") == "native"
    assert judge([entry("cubin", 100, "f")], "sm_120") == "none"


def test_ptx_jit_forward_except_arch_specific() -> None:
    assert judge([entry("ptx", 80)], "sm_120") == "ptx"
    assert judge([entry("ptx", 120)], "sm_90") == "none"
    assert judge([entry("ptx", 90, "a")], "sm_100") == "none"
    assert judge([entry("ptx", 90, "a")], "sm_90") == "ptx"
    assert judge([entry("ptx", 100, "f")], "sm_103") == "ptx"
    assert judge([entry("ptx", 100, "f")], "sm_120") == "none"


def test_native_wins_over_ptx_and_no_gpu_code_is_na() -> None:
    assert judge([entry("ptx", 80), entry("cubin", 120)], "sm_120") == "native"
    assert judge([], "sm_120") == "n/a"
    assert coverage.worst(["native", "n/a", "ptx"]) == "ptx"
    assert coverage.worst(["n/a"]) == "n/a"
    assert coverage.worst(["native", "none"]) == "none"


def test_loader_rules_from_data_pick_sm90_only_on_cc90() -> None:
    rules = coverage.loader_rules()
    sm90 = "sgl_kernel/sm90/common_ops.abi3.so"
    sm100 = "sgl_kernel/sm100/common_ops.abi3.so"
    t90, t120, t100 = (coverage.parse_target(t) for t in ("sm_90", "sm_120", "sm_100"))
    assert coverage.loaded_on(sm90, t90, rules) and not coverage.loaded_on(sm100, t90, rules)
    for t in (t120, t100):
        assert coverage.loaded_on(sm100, t, rules) and not coverage.loaded_on(sm90, t, rules)
    assert coverage.loaded_on("other/x.so", t90, rules)


def test_optional_rules() -> None:
    rules = coverage.optional_rules()
    assert coverage.optional_feature("sgl_kernel/flash_ops.abi3.so", rules)
    assert coverage.optional_feature("sgl_kernel/sm100/common_ops.abi3.so", rules) is None
