"""Serving-path relevance (check/relevance.py): a finding about a file the serving
process does not load is latent, shown but not deciding the verdict. Real shared
objects built here with gcc, and a real probe run: a package `srv` whose import maps
`srv/_core.so` through ctypes, and a package `extra` whose `_c.so` needs libraries
that are gone (as torchao's and torchaudio's extensions next to an SGLang server)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from stackmatrix import engine_registry
from stackmatrix.built_environment import Environment
from stackmatrix.check import _probe_script, probe, relevance
from stackmatrix.check.phase import CheckOutcome, check_environment, verdict_of
from stackmatrix.findings import Finding, Severity
from stackmatrix.records.phases import CheckData
from stackmatrix.report.cells import _targets
from stackmatrix.report.load import CellResults

SRV_INIT = (
    "import ctypes, os\n_core = ctypes.CDLL(os.path.join(os.path.dirname(__file__), '_core.so'))\n"
)
EXTRA_C = "int gone(void);\nint other(void);\nint entry(void) { return gone() + other(); }\n"


def _gcc(*argv: str | Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required for these tests: install gcc")
    subprocess.run([gcc, "-shared", "-fPIC", *map(str, argv)], check=True)


def _site(tmp_path: Path) -> Path:
    """site-packages with `srv` (loads srv/_core.so) and `extra` (extra/_c.so needs
    libmissing.so.1, a system library, and libtorch_gone.so.1, a stack library)."""
    site = tmp_path / "site-packages"
    gone = tmp_path / "gone"
    for d in (site / "srv", site / "extra", gone):
        d.mkdir(parents=True)
    (tmp_path / "core.c").write_text("int core(void) { return 1; }\n")
    _gcc("-o", site / "srv" / "_core.so", tmp_path / "core.c")
    (site / "srv" / "__init__.py").write_text(SRV_INIT)
    for soname, symbol in (("libmissing.so.1", "gone"), ("libtorch_gone.so.1", "other")):
        src = tmp_path / f"{symbol}.c"
        src.write_text(f"int {symbol}(void) {{ return 2; }}\n")
        _gcc(f"-Wl,-soname,{soname}", "-o", gone / (soname.split(".so")[0] + ".so"), src)
    (tmp_path / "extra.c").write_text(EXTRA_C)
    ext = site / "extra" / "_c.so"
    _gcc("-o", ext, tmp_path / "extra.c", "-L", gone, "-lmissing", "-ltorch_gone")
    (site / "extra" / "__init__.py").write_text("")
    shutil.rmtree(gone)
    return site


def _check(site: Path, **serving: Any) -> CheckOutcome:
    # -S: only the test's site-packages (PYTHONPATH) is on the interpreter's path
    env = Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(site,),
        env={"PYTHONPATH": str(site)},
    )
    return check_environment(
        env,
        cell_id="c",
        targets=["sm_120"],
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        **serving,
    )


def _about(outcome: CheckOutcome, subject: str) -> list[Finding]:
    return [f for f in outcome.findings if f.subject == subject]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _site(tmp_path_factory.mktemp("relevance"))


def test_a_file_the_server_does_not_load_is_latent(site: Path) -> None:
    outcome = _check(site, serving_modules=["srv"])
    extra = _about(outcome, "extra/_c.so")
    assert {f.code for f in extra} == {"SM-LIB-MISSING", "SM-LIB-HOST-MISSING"}
    assert all(f.details["latent"] is True for f in extra)
    assert all("latent" in f.message for f in extra)
    assert Severity.FAIL in {f.severity for f in extra}  # shown and counted as it was
    assert outcome.verdict == "compatible"
    serving = outcome.data["serving_path"]
    assert serving["known"] is True and serving["module"] == "srv"
    assert serving["latent"] == ["extra/_c.so"]  # srv/_core.so is mapped: not latent
    loaded = outcome.data["probe"]["loaded_libraries"]
    assert str((site / "srv" / "_core.so").resolve()) in loaded


def test_without_a_loaded_set_every_file_counts(site: Path) -> None:
    outcome = _check(site)
    extra = _about(outcome, "extra/_c.so")
    assert extra and not any(relevance.is_latent(f) for f in extra)
    assert outcome.verdict == "incompatible"
    assert outcome.data["serving_path"]["known"] is False
    assert outcome.data["probe"]["loaded_libraries"] is None


def test_a_serving_module_that_does_not_import_leaves_nothing_latent(site: Path) -> None:
    outcome = _check(site, serving_modules=["no_such_serving_module", "also_absent"])
    assert outcome.verdict == "incompatible"
    unknown = [f for f in outcome.findings if f.code == "SM-SERVING-PATH-UNKNOWN"]
    assert len(unknown) == 1 and unknown[0].severity is Severity.INFO
    assert "no_such_serving_module: ModuleNotFoundError" in unknown[0].message
    assert not relevance.is_latent(unknown[0])


def _plan(engine: str | None, serving_modules: list[str] | None = None) -> Any:
    """What the probe script reads of the argv that check/probe.py gives it."""
    argv = probe.probe_argv(["py"], engine=engine, serving_modules=serving_modules)
    return _probe_script.serving_plan(argv[argv.index("--") + 1 :])


def test_the_engines_serving_modules_are_the_defaults() -> None:
    assert _plan("sglang") == (
        "sglang",
        ["sglang.srt.entrypoints.http_server", "sglang.srt.server_args", "sglang"],
        ["sgl_kernel", "flashinfer"],
    )
    assert _plan("vllm")[1][0] == "vllm.entrypoints.openai.api_server"
    assert _plan("transformers")[1:] == (["transformers"], [])
    assert _plan("sglang", ["a", "b"]) == ("sglang", ["a", "b"], [])
    assert _plan(None) == (None, [], [])
    assert _plan("external") == ("external", [], [])
    assert _probe_script.serving_plan([]) == (None, [], [])


def test_the_probe_imports_every_engines_extension_modules_by_default() -> None:
    argv = probe.probe_argv(["py"])
    assert argv[argv.index("--modules") + 1].split(",") == list(engine_registry.extension_modules())
    argv = probe.probe_argv(["py"], ["json"])
    assert argv[argv.index("--modules") + 1] == "json"


def test_mapped_libraries_reads_proc_maps() -> None:
    maps = (
        "7f0-7f1 r-xp 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f1-7f2 r--p 00000000 08:01 13 /sp/torchao/_C.abi3.so\n"
        "7f2-7f3 r--p 00000000 08:01 13 /sp/torchao/_C.abi3.so\n"
        "7f3-7f4 r-xp 00000000 08:01 14 /sp/x/_y.so (deleted)\n"
        "7f4-7f5 rw-p 00000000 00:00 0 [heap]\n"
        "7f5-7f6 r--p 00000000 08:01 15 /usr/lib/locale/C.utf8/LC_CTYPE\n"
        "7f6-7f7 r--p 00000000 08:01 16 /data/model.sonnet\n"
        "7f7-7f8 rw-p 00000000 00:00 0\n"
    )
    assert _probe_script.mapped_libraries(maps) == [
        "/sp/torchao/_C.abi3.so",
        "/sp/x/_y.so",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
    ]


def _probe(imported: str | None, loaded: list[str] | None, **more: Any) -> dict[str, Any]:
    modules = [{"module": "srv", "ok": imported is not None}, *more.pop("modules", [])]
    serving = {"imported": imported, "modules": modules, **more}
    return {"serving": serving, "loaded_libraries": loaded}


def test_a_loaded_set_is_known_only_when_the_serving_path_imported(tmp_path: Path) -> None:
    lib = tmp_path / "srv" / "_core.so"
    lib.parent.mkdir()
    lib.write_bytes(b"x")
    assert relevance.loaded_set(None, Path("/")) is None
    assert relevance.loaded_set({"serving": None, "loaded_libraries": None}, Path("/")) is None
    assert relevance.loaded_set(_probe(None, [str(lib)]), Path("/")) is None
    assert relevance.loaded_set(_probe("srv", [str(lib)], truncated=True), Path("/")) is None
    known = relevance.loaded_set(_probe("srv", [str(lib)]), Path("/"))
    assert known is not None and known.loads(lib)
    # a docker root: the probe's paths are the image's, the check's the exported root's
    in_image = relevance.loaded_set(_probe("srv", ["/srv/_core.so"]), tmp_path)
    assert in_image is not None and in_image.loads(lib)


def test_files_of_a_package_whose_serving_import_failed_are_not_latent(tmp_path: Path) -> None:
    site = tmp_path
    kernel = site / "sgl_kernel" / "common_ops.abi3.so"
    other = site / "torchao" / "_C.abi3.so"
    for p in (kernel, other):
        p.parent.mkdir()
        p.write_bytes(b"x")
    failed = [{"module": "sgl_kernel", "ok": False, "error": {"type": "OSError"}}]
    loaded = relevance.loaded_set(_probe("srv", [], modules=failed), Path("/"))
    exts = [{"path": str(p), "relpath": p.relative_to(site).as_posix()} for p in (kernel, other)]
    assert list(relevance.latent_files(exts, [site], loaded)) == ["torchao/_C.abi3.so"]
    assert relevance.latent_files(exts, [site], None) == {}
    assert relevance.latent_files(exts, [tmp_path / "elsewhere"], loaded) == {}


def test_only_findings_about_a_latent_file_are_marked() -> None:
    latent = {"torchao/_C.abi3.so": Path("/sp/torchao/_C.abi3.so")}
    arch = Finding("SM-ARCH-NONE", Severity.FAIL, "no sm_120", subject="torchao/_C.abi3.so")
    driver_lib = Finding("SM-DRIVER-LIB-ABSENT", Severity.WARN, "x", subject="torchao/_C.abi3.so")
    mixed = Finding("SM-CUDA-MIXED", Severity.FAIL, "two majors", subject="cuda")
    marked = relevance.mark_latent([arch, driver_lib, mixed], latent)
    assert [relevance.is_latent(f) for f in marked] == [True, False, False]
    assert arch.details == {}  # a copy: the scan cache's findings stay as they were
    assert verdict_of(marked[:1]) == "compatible"
    assert verdict_of(marked[:2]) == "warnings"
    assert verdict_of(marked) == "incompatible"


def _cell(summary: dict[str, str], serving: dict[str, Any] | None) -> CellResults:
    extra = {"serving_path": serving} if serving is not None else {}
    check = CheckData(target_summary=cast(Any, summary), extra=cast(Any, extra))
    return cast(CellResults, SimpleNamespace(check=check))


def test_the_targets_column_judges_the_loaded_files() -> None:
    loaded = {"known": True, "target_summary": {"sm_120": "native", "sm_90": "none"}}
    full = {"sm_120": "none", "sm_90": "none"}
    assert _targets(_cell(full, loaded), ["sm_120", "sm_90"]) == {
        "sm_120": "native (latent gaps)",
        "sm_90": "none",
    }
    assert _targets(_cell(full, {**loaded, "known": False}), ["sm_120"]) == {"sm_120": "none"}
    assert _targets(_cell(full, None), ["sm_120"]) == {"sm_120": "none"}
    only_latent_code = {"known": True, "target_summary": {"sm_120": "n/a"}}
    assert _targets(_cell({"sm_120": "native"}, only_latent_code), ["sm_120"]) == {
        "sm_120": "native"
    }


def test_vllm_serving_path_names_the_kernels_import_kernels_loads() -> None:
    _, entry, model_load = _plan("vllm")
    assert entry == ["vllm.entrypoints.openai.api_server", "vllm"]
    assert model_load[0] == "vllm.v1.engine.core"  # the engine-core process's module
    assert {"vllm._C", "vllm._moe_C", "vllm._C_stable_libtorch"} <= set(model_load)


def test_a_kernel_module_this_version_lacks_is_absent_not_failed() -> None:
    def attempt(module: str, message: str) -> dict[str, Any]:
        error = {"type": "ModuleNotFoundError", "message": message}
        return {"module": module, "ok": False, "error": error}

    absent = attempt("vllm._C_stable_libtorch", "No module named 'vllm._C_stable_libtorch'")
    known = relevance.loaded_set(_probe("srv", [], modules=[absent]), Path("/"))
    assert known is not None and known.failed_packages == frozenset()
    broken = attempt("vllm._C", "No module named 'triton'")  # a dependency is missing
    known = relevance.loaded_set(_probe("srv", [], modules=[absent, broken]), Path("/"))
    assert known is not None and known.failed_packages == frozenset({"vllm"})
