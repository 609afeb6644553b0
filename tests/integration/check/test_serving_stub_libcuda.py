"""The serving path without a GPU: sglang's `sglang.srt.entrypoints.http_server` loads
extensions that link the driver's `libcuda.so.1`, so on a machine without the driver
its import fails and the probe fell back to `sglang.srt.server_args`, judging a part of
the serving path (reports/examples/cuda-images: 227 extensions latent, torchaudio's
among them, which the live server maps). The probe now imports the entry with the CUDA
toolkit's stub `libcuda.so` as `libcuda.so.1` on its own child's LD_LIBRARY_PATH.

Real parts: a stub libcuda.so built by gcc with the toolkit stub's soname, laid out as
a toolkit lays it out, and a CPython extension built by gcc whose DT_NEEDED is
libcuda.so.1, imported by the server's entry module `srvx.entry`; `srvx.light` is the
lighter fallback."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check._elffile import ELFFile
from stackmatrix.check.phase import CheckOutcome, check_environment

pytestmark = pytest.mark.integration

STUB_C = "int cuInit(unsigned int flags) { (void)flags; return 34; }\n"  # STUB_LIBRARY
EXT_C = """
#include <Python.h>
int cuInit(unsigned int flags);
static PyObject* init(PyObject* self, PyObject* args) { return PyLong_FromLong(cuInit(0)); }
static PyMethodDef methods[] = {{"init", init, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&mod); }
"""


def _gcc(*argv: str | Path) -> None:
    done = subprocess.run(["gcc", *map(str, argv)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"gcc failed: {done.stderr}")


def _no_driver_here() -> None:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return
    pytest.fail("these tests judge a machine without the NVIDIA driver; this one has libcuda.so.1")


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A toolkit with lib64/stubs, another with targets/*/lib/stubs, and the engine."""
    _no_driver_here()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "stub.c").write_text(STUB_C)
    (tmp_path / "src" / "ext.c").write_text(EXT_C)
    stubs = tmp_path / "cuda" / "lib64" / "stubs"
    targets = tmp_path / "cuda-t" / "targets" / "x86_64-linux" / "lib" / "stubs"
    for where in (stubs, targets):
        where.mkdir(parents=True)
        _gcc(
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            where / "libcuda.so",
            tmp_path / "src" / "stub.c",
        )
    pkg = tmp_path / "site-packages" / "srvx"
    pkg.mkdir(parents=True)
    _gcc(
        "-shared",
        "-fPIC",
        f"-I{sysconfig.get_paths()['include']}",
        "-o",
        pkg / "_C.so",
        tmp_path / "src" / "ext.c",
        f"-L{stubs}",
        "-lcuda",
    )
    (pkg / "__init__.py").write_text("")
    (pkg / "entry.py").write_text("from srvx import _C\n")
    (pkg / "light.py").write_text("")
    (tmp_path / "tmp").mkdir()
    return {
        "site": pkg.parent,
        "cuda": tmp_path / "cuda",
        "cuda-t": tmp_path / "cuda-t",
        "ext": pkg / "_C.so",
        "tmp": tmp_path / "tmp",
    }


def _check(layout: dict[str, Path], **env: str) -> CheckOutcome:
    environment = Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(layout["site"],),
        env={"PYTHONPATH": str(layout["site"]), "TMPDIR": str(layout["tmp"]), **env},
    )
    return check_environment(
        environment,
        cell_id="c",
        targets=["sm_90"],
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        serving_modules=["srvx.entry", "srvx.light"],
    )


def test_the_extension_needs_the_drivers_library(layout: dict[str, Path]) -> None:
    with ELFFile(layout["ext"]) as ext:
        assert "libcuda.so.1" in ext.dynamic().needed
    with ELFFile(layout["cuda"] / "lib64" / "stubs" / "libcuda.so") as stub:
        assert stub.dynamic().soname == "libcuda.so.1"


def test_without_the_stub_the_entry_fails_and_a_fallback_is_judged(
    layout: dict[str, Path],
) -> None:
    outcome = _check(layout, STACKMATRIX_LIBCUDA_STUB="none")
    probe = outcome.data["probe"]
    entry = probe["serving"]["modules"][0]
    assert (entry["module"], entry["ok"]) == ("srvx.entry", False)
    assert "libcuda.so.1: cannot open shared object file" in entry["error"]["message"]
    assert probe["serving"]["imported"] == "srvx.light"
    assert probe["libcuda"] == {"source": "none", "stub": None}
    assert outcome.data["serving_path"]["judged_on"] == "fallback"
    partial = [f for f in outcome.findings if f.code == "SM-SERVING-PARTIAL"]
    assert len(partial) == 1 and "no stub libcuda.so found" in partial[0].message
    assert not [f for f in outcome.findings if f.code == "SM-SERVING-STUB-LIBCUDA"]


@pytest.mark.parametrize("toolkit", ["cuda", "cuda-t"])
def test_with_the_toolkits_stub_the_entry_itself_imports(
    layout: dict[str, Path], toolkit: str
) -> None:
    before = os.environ.get("LD_LIBRARY_PATH")
    outcome = _check(layout, CUDA_HOME=str(layout[toolkit]), LD_LIBRARY_PATH="/opt/cell/lib")
    probe = outcome.data["probe"]
    assert probe["serving"]["imported"] == "srvx.entry"
    assert probe["libcuda"]["source"] == "stub"
    assert Path(probe["libcuda"]["stub"]).is_relative_to(layout[toolkit])
    assert str(layout["ext"]) in probe["loaded_libraries"]
    assert outcome.data["serving_path"]["judged_on"] == "entry with stub libcuda"
    codes = {f.code for f in outcome.findings}
    assert "SM-SERVING-STUB-LIBCUDA" in codes and "SM-SERVING-PARTIAL" not in codes
    # the stub's directory was the probe child's alone: not recorded as the cell's
    # LD_LIBRARY_PATH, removed afterwards, never set in this process
    assert probe["env"]["LD_LIBRARY_PATH"] == "/opt/cell/lib"
    assert list(layout["tmp"].iterdir()) == []
    assert os.environ.get("LD_LIBRARY_PATH") == before


def test_a_probe_that_dies_with_the_stub_runs_again_without_it(
    layout: dict[str, Path], tmp_path: Path
) -> None:
    # a stub whose loading ends the process: the stubbed child gives no result
    (tmp_path / "src" / "dying.c").write_text(
        "#include <unistd.h>\n"
        "__attribute__((constructor)) static void die(void) { _exit(3); }\n" + STUB_C
    )
    dying = tmp_path / "dying" / "libcuda.so"
    dying.parent.mkdir()
    _gcc("-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", dying, tmp_path / "src" / "dying.c")
    outcome = _check(layout, STACKMATRIX_LIBCUDA_STUB=str(dying))
    probe = outcome.data["probe"]
    assert probe["libcuda"] == {
        "source": "none",
        "stub": str(dying),
        "stub_error": "the probe with the stub exited with 3 and no result",
    }
    assert probe["serving"]["imported"] == "srvx.light"
    assert outcome.data["serving_path"]["judged_on"] == "fallback"
    partial = next(f for f in outcome.findings if f.code == "SM-SERVING-PARTIAL")
    assert f"the stub {dying} was tried" in partial.message
