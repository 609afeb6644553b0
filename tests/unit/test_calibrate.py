from __future__ import annotations

from pathlib import Path

import pytest

from stackmatrix.calibrate import CalibrationData, launch_values, noise_note, render
from stackmatrix.cli import main
from stackmatrix.jsontypes import JSONObject
from stackmatrix.stats.power import Calibration


def test_launch_values_skip_failed_rounds() -> None:
    data: JSONObject = {
        "launches": [
            {"rounds": [{"metrics": {"decode_tok_s": 70.0}}, {"metrics": {"decode_tok_s": None}}]},
            {"rounds": []},
            {"rounds": [{"metrics": {"decode_tok_s": 68}}]},
        ]
    }
    assert launch_values(data, "decode_tok_s") == [[70.0], [68.0]]


CAL: CalibrationData = {
    "launches": 5,
    "rounds_per_launch": 2.0,
    "per_launch_sd": 0.05,
    "launch_sd": 0.04,
    "within_sd": 0.02,
    "alpha": 0.05,
    "power": 0.8,
    "detectable": [{"launches": k, "change": c} for k, c in ((3, 0.2), (5, 0.1), (10, 0.02))],
}


def test_noise_note_gives_the_verdicts_own_power_figure() -> None:
    """One power figure: the verdicts' own (their pairs), not the calibration's table."""
    lines = noise_note(CAL, min_effect=0.03, detectable={"b": 0.012, "c": 0.041})
    assert "5.0%" in lines[0]
    assert "about 4.1% or more" in lines[1] and "c has the widest" in lines[1]
    assert lines[2].startswith("WARNING") and "min_effect 3.0%" in lines[2]
    assert not any("WARNING" in x for x in noise_note(CAL, 0.05, detectable={"b": 0.041}))
    # the calibration's own rows (20% with 3 launches, ...) are no longer quoted
    assert not any(
        "20.0%" in x or "10.0%" in x for x in noise_note(CAL, 0.03, detectable={"b": 0.01})
    )
    assert len(noise_note(CAL, 0.03)) == 1
    assert noise_note(None, 0.03) == []


def test_noise_note_names_the_cell_it_was_estimated_from() -> None:
    assert "of the baseline)" in noise_note({**CAL, "cell": "a"}, 0.03, baseline="a")[0]
    # the baseline failed: the estimate came from another cell, and says so
    line = noise_note({**CAL, "cell": "b"}, 0.03, baseline="a")[0]
    assert "launches of b (the baseline has too few)" in line


def test_render_lists_launches_and_detectable_changes() -> None:
    cal = Calibration(
        launches=5,
        rounds_per_launch=2.0,
        per_launch_sd=0.05,
        launch_sd=0.04,
        within_sd=0.02,
        alpha=0.05,
        power=0.8,
        detectable=((3, 0.2), (5, 0.1), (10, 0.02)),
    )
    text = render("a", "decode_tok_s", [[70.0, 71.0], [65.0, 66.0]], cal, 0.05)
    assert "launch 1: 65.00, 66.00" in text
    assert "within-launch sd: 2.00%" in text
    assert "3 launches per cell: 20.00%  (> min_effect 5.0%)" in text


@pytest.mark.parametrize("launches", ["1", "1001", "1000000000"])
def test_calibrate_refuses_launches_out_of_range_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], launches: str
) -> None:
    # a billion launches were planned in memory at once and the process was OOM-killed
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "s"\n\n[[cell]]\nid = "a"\nbackend = "current"\n\n[bench]\nmodel = "m"\n'
    )
    out = tmp_path / "out"
    argv = ["calibrate", str(spec), "--launches", launches, "--output", str(out)]
    assert main(argv) == 2
    assert "calibrate --launches must be from 2 to 1000" in capsys.readouterr().err
    assert not out.exists()
