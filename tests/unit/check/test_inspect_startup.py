"""`stackmatrix inspect` imports only what it needs.

Start-up was most of inspect's run on real extensions (the scan of sgl-kernel's four
takes ~20 ms, the process took ~190 ms): these modules are for other commands, for a
wheel, or for a *.dist-info, and must not creep back into a directory's inspection.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NOT_FOR_A_DIRECTORY = (
    "packaging",  # dist-info requirements and versions (inventory.py)
    "email",  # METADATA (inventory.py)
    "csv",  # RECORD (inventory.py)
    "zipfile",  # a wheel (_wheel.py)
    "tempfile",  # a wheel's unpacking
    "subprocess",  # c++filt, the probe, the backends (_proc.py)
    "platform",
    "stackmatrix._proc",
    "stackmatrix._secrets",
    "stackmatrix.spec_model",  # the other commands' parser choices: spec_names.py
    "stackmatrix.specfile",
    "stackmatrix.pipeline",
    "stackmatrix.report",
    "stackmatrix.bench",
    "stackmatrix.builder",
    "stackmatrix.check.environment",
    "stackmatrix.check.scancache",
    "stackmatrix.check.probe",
    # the pipeline's and the other commands' (measured: a third of inspect's whole
    # process on sgl-kernel was these imports and their parsers)
    "argparse",  # `[-v] inspect PATH [--target X]... [--json]` is read by cli._plain_inspect
    "logging",  # _log.Logger imports it at the first message
    "dataclasses",  # the check records are named tuples
    "inspect",  # the standard library's, which dataclasses imports
)

_RUN = """
import contextlib, io, sys
from stackmatrix.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["inspect", sys.argv[1], "--json"])
print(rc, " ".join(sys.modules))
"""


def _an_extension() -> str:
    """A real ELF extension of this interpreter's (builds differ in which are built in)."""
    for name in ("_json", "_csv", "_struct", "_bisect", "math", "select", "_ctypes"):
        path = getattr(importlib.import_module(name), "__file__", None)
        if path and path.endswith(".so"):
            return str(path)
    raise AssertionError("this interpreter has no extension module in a file")


def test_inspecting_a_directory_imports_none_of_the_rest(tmp_path: Path) -> None:
    shutil.copy(_an_extension(), tmp_path / "ext.so")  # a real ELF extension
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(tmp_path)], capture_output=True, text=True, check=True
    )
    rc, modules = out.stdout.split(" ", 1)
    assert rc == "0", out.stdout  # it was inspected: compatible, no GPU code
    loaded = set(modules.split())
    assert "stackmatrix.check.scan" in loaded  # the check below would pass vacuously
    unwanted = {m for m in loaded for n in NOT_FOR_A_DIRECTORY if m == n or m.startswith(n + ".")}
    assert not unwanted


def test_a_target_that_is_not_an_arch_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stackmatrix.cli import main

    assert main(["inspect", str(tmp_path), "--target", "foo"]) == 2
    err = capsys.readouterr().err
    assert "inspect --target: not a GPU arch: 'foo'" in err and "Traceback" not in err


# --- the command line read without argparse ------------------------------------------------

PLAIN = [
    ["inspect", "x"],
    ["inspect", "x", "--json"],
    ["-v", "inspect", "--json", "x"],
    ["--verbose", "-v", "inspect", "x", "--target", "sm_90", "--target=sm_120a"],
    ["inspect", "--target=", "x"],
    ["inspect", "a b/c.so", "--json", "--json"],
]
NOT_PLAIN = [
    ["inspect"],  # no path: argparse's usage error
    ["inspect", "x", "y"],
    ["inspect", "x", "--js"],  # argparse takes abbreviations; so it reads this one
    ["inspect", "x", "-h"],
    ["inspect", "--", "-x"],
    ["inspect", "x", "--target"],
    ["inspect", "x", "--target", "--json"],
    ["inspect", "-"],
    ["inspect", "x", "-v"],
    ["validate", "x"],
    ["-h"],
    [],
]


@pytest.mark.parametrize("argv", PLAIN)
def test_a_plain_inspect_is_read_as_argparse_reads_it(argv: list[str]) -> None:
    from stackmatrix.cli import _parser, _plain_inspect

    fast = _plain_inspect(argv)
    assert fast is not None
    assert vars(fast) == vars(_parser("inspect").parse_args(argv))


@pytest.mark.parametrize("argv", NOT_PLAIN)
def test_any_other_form_is_left_to_argparse(argv: list[str]) -> None:
    from stackmatrix.cli import _plain_inspect

    assert _plain_inspect(argv) is None


def test_argparse_still_says_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    from stackmatrix.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["inspect", "x", "--bogus"])
    assert exc.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


# --- logging set up by the first message ----------------------------------------------------

_LOG = """
import sys
from stackmatrix import _log
_log.configure(verbose=sys.argv[1] == "-v", now=False)
before = "logging" in sys.modules
_log.Logger("stackmatrix.check.libs").debug("skipping %s", "libx.so")
_log.Logger("stackmatrix.check.symbols").info("c++filt not found")
print(before, "logging" in sys.modules)
"""


@pytest.mark.parametrize("verbose", [True, False])
def test_logging_is_set_up_by_the_first_message(verbose: bool) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LOG, "-v" if verbose else "-q"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["False", "True"]
    assert "INFO stackmatrix.check.symbols: c++filt not found" in out.stderr
    debug = "DEBUG stackmatrix.check.libs: skipping libx.so"
    assert (debug in out.stderr) is verbose


def test_used_as_a_library_logging_is_left_to_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from stackmatrix import _log

    root_handlers = list(logging.getLogger().handlers)
    with caplog.at_level(logging.DEBUG, logger="stackmatrix.check.libs"):
        _log.Logger("stackmatrix.check.libs").debug("skipping %s", "liby.so")
    assert caplog.messages == ["skipping liby.so"]
    assert logging.getLogger().handlers == root_handlers  # no basicConfig of ours


# --- the records ----------------------------------------------------------------------------


def test_each_finding_has_its_own_details_and_survives_copying() -> None:
    import copy

    from stackmatrix.findings import Finding, Severity

    a = Finding(code="SM-X", severity=Severity.WARN, message="m")
    b = Finding(code="SM-X", severity=Severity.WARN, message="m")
    assert a == b and a.details == {} and a.details is not b.details
    changed = a._replace(message="n", details={"k": 1})
    assert isinstance(changed, Finding) and changed.message == "n" and a.message == "m"
    assert copy.deepcopy(changed) == changed  # through __reduce_ex__, as pickle would
    assert Finding.from_dict(changed.to_dict()) == changed
