"""The runtime probe, run by path with a cell's own interpreter.

Self-contained on purpose: stackmatrix is not installed in cell environments, so
this file imports only the standard library (and, guarded, what it probes). What it
imports is handed to it on the command line by check/probe.py, from the engine
registry: `--modules` (the extension modules to import), `--engine`, and the engine's
`--serving-modules` (entry modules, in order) and `--model-load-modules`. It prints one
JSON object on stdout. Without a GPU it says so and runs what it can; it never pretends.

Where the dynamic loader finds no `libcuda.so.1` (a machine without the NVIDIA driver),
the probe runs itself again with the CUDA toolkit's stub `libcuda.so` as `libcuda.so.1`
in a private temporary directory put first on that child's LD_LIBRARY_PATH only, so an
entry module that links the driver imports (the serving path without a GPU); its JSON
says so (`libcuda.source == "stub"`). A child that gives no result leaves the probe to
run here, without the stub.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
MARKER = "STACKMATRIX-PROBE-JSON: "
MAX_LOADED_LIBRARIES = 5000
ENV_PREFIXES = ("CUDA_", "NCCL_", "SGLANG_", "SGL_", "FLASHINFER_", "VLLM_", "TORCH_", "PYTORCH_")
ENV_NAMES = (
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "OMP_NUM_THREADS",
    "HF_HUB_OFFLINE",
    "TRITON_CACHE_DIR",
)
# The same words as stackmatrix._secrets.CREDENTIAL_NAME_PATTERN (this script runs inside a
# cell's interpreter and imports nothing of ours; a unit test keeps the two equal).
CREDENTIAL_NAME_PATTERN = (
    r"(?:^|[_\-.])(?:secret|passw(?:or)?d|api[_\-]?key|access[_\-]?key|private[_\-]?key|"
    r"credentials?|authorization|cookie|session[_\-]?key)(?:$|[_\-.])"
    r"|(?:^|[_\-.])(?:token|auth|key)$"
)
MORE_CREDENTIAL_NAME_PATTERN = (
    r"(?:^|[_\-.])(?:creds?|passphrase|auth[_\-]?(?:key|token))(?:$|[_\-.])"
    r"|passw(?:or)?d$|passphrase$"
    r"|(?<!com)(?<!by)(?<!sur)(?<!tres)(?<!over)(?<!under)pass$"
)
_SECRET = re.compile(f"{CREDENTIAL_NAME_PATTERN}|{MORE_CREDENTIAL_NAME_PATTERN}", re.IGNORECASE)


LIBCUDA_STUB_FLAG = "--libcuda-stub"
LIBCUDA_DIR_FLAG = "--libcuda-dir"
# a path: that stub; "none": no stub (the probe then judges what imports without one)
LIBCUDA_STUB_ENV = "STACKMATRIX_LIBCUDA_STUB"
# where the CUDA toolkit (runfile, .deb, conda) and NVIDIA's wheels put the driver's stub
_TOOLKIT_STUBS = (
    "lib64/stubs/libcuda.so",
    "lib/stubs/libcuda.so",
    "targets/*/lib/stubs/libcuda.so",
)
_WHEEL_STUBS = ("nvidia/*/lib/stubs/libcuda.so", "nvidia/*/lib64/stubs/libcuda.so")


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:4000]}


def behaviour_env(stub_dir: str | None = None) -> dict[str, str]:
    """The variables that change behaviour; the stub's private directory is no part of
    the cell's own LD_LIBRARY_PATH (it differs on every run)."""
    out: dict[str, str] = {}
    for name, value in sorted(os.environ.items()):
        if name == "LD_LIBRARY_PATH" and stub_dir:
            value = os.pathsep.join(p for p in value.split(os.pathsep) if p != stub_dir)
            if not value:
                continue
        if name.startswith(ENV_PREFIXES) or name in ENV_NAMES:
            out[name] = "<redacted>" if _SECRET.search(name) else value
    return out


def driver_loadable() -> bool:
    """Whether the dynamic loader finds a libcuda.so.1, asked of a child so that this
    process maps nothing before the serving path is imported."""
    argv = [sys.executable, "-S", "-c", "import ctypes; ctypes.CDLL('libcuda.so.1')"]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def cuda_roots() -> list[Path]:
    named = [os.environ.get(n) for n in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    roots = [Path(v) for v in named if v] + [Path("/usr/local/cuda")]
    return roots + sorted(Path("/usr/local").glob("cuda-*"), reverse=True)


def _first_file(roots: list[Path], patterns: tuple[str, ...]) -> Path | None:
    for root in roots:
        for pattern in patterns:
            for hit in sorted(root.glob(pattern)):
                if hit.is_file():
                    return hit
    return None


def find_libcuda_stub() -> Path | None:
    """The driver's stub: $STACKMATRIX_LIBCUDA_STUB, else a CUDA toolkit's, else one
    shipped in an `nvidia` wheel of the import path."""
    chosen = os.environ.get(LIBCUDA_STUB_ENV)
    if chosen:
        return Path(chosen) if chosen != "none" and Path(chosen).is_file() else None
    wheels = [Path(p) for p in sys.path if p and Path(p).is_dir()]
    return _first_file(cuda_roots(), _TOOLKIT_STUBS) or _first_file(wheels, _WHEEL_STUBS)


def _own_argv() -> list[str] | None:
    """This process's arguments after the interpreter (the -c source included), read
    from /proc: the probe is handed to the interpreter as a string, not a file."""
    try:
        raw = Path("/proc/self/cmdline").read_bytes()
    except OSError:
        return None
    words = raw[:-1].split(b"\0") if raw.endswith(b"\0") else raw.split(b"\0")
    return [os.fsdecode(w) for w in words[1:]]


def rerun_with_stub(stub: Path) -> tuple[str | None, str | None]:
    """(the output of this probe run again with `stub` as libcuda.so.1, None when that
    run gave no result; why not)."""
    args = _own_argv()
    if args is None:
        return None, "/proc/self/cmdline is unreadable"
    with tempfile.TemporaryDirectory(prefix="stackmatrix-libcuda-") as tmp:
        (Path(tmp) / "libcuda.so.1").symlink_to(stub)
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (tmp, os.environ.get("LD_LIBRARY_PATH")) if p
        )
        argv = [sys.executable, *args, LIBCUDA_STUB_FLAG, str(stub), LIBCUDA_DIR_FLAG, tmp]
        try:
            done = subprocess.run(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, check=False
            )
        except OSError as exc:
            return None, f"cannot run {sys.executable}: {exc}"
    out = done.stdout.decode("utf-8", errors="replace")
    if done.returncode != 0 or MARKER not in out:
        return None, f"the probe with the stub exited with {done.returncode} and no result"
    return out, None


def libcuda_plan(argv: list[str]) -> tuple[dict[str, Any], str | None]:
    """(what libcuda.so.1 this probe has: the driver's, the stub, none; the output of
    the stubbed child, to print instead of running here)."""
    stub = _arg(argv, LIBCUDA_STUB_FLAG)
    if stub is not None:
        return {"source": "stub", "stub": stub}, None
    if driver_loadable():
        return {"source": "driver"}, None
    found = find_libcuda_stub()
    if found is None:
        return {"source": "none", "stub": None}, None
    out, why = rerun_with_stub(found)
    return {"source": "none", "stub": str(found), "stub_error": why}, out


def probe_torch() -> tuple[dict[str, Any], Any]:
    try:
        torch = importlib.import_module("torch")
    except Exception as exc:
        return {"installed": False, "error": _error(exc)}, None
    info: dict[str, Any] = {
        "installed": True,
        "version": getattr(torch, "__version__", None),
        "cuda": getattr(torch.version, "cuda", None),
        "git_version": getattr(torch.version, "git_version", None),
        "cxx11_abi": bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False)),
    }
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        info["cudnn"] = None
        info["cudnn_error"] = _error(exc)
    try:
        info["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception:
        info["arch_list"] = []
    try:
        nccl = torch.cuda.nccl.version()
        info["nccl"] = ".".join(str(p) for p in nccl) if isinstance(nccl, tuple) else str(nccl)
    except Exception as exc:
        info["nccl"] = None
        info["nccl_error"] = _error(exc)
    return info, torch


def probe_devices(torch: Any) -> dict[str, Any]:
    if torch is None:
        return {"cuda_available": False, "reason": "torch is not installed", "devices": []}
    try:
        available = bool(torch.cuda.is_available())
    except Exception as exc:
        return {
            "cuda_available": False,
            "reason": f"torch.cuda.is_available failed: {exc}",
            "devices": [],
        }
    if not available:
        return {
            "cuda_available": False,
            "reason": "torch.cuda.is_available() is False",
            "devices": [],
        }
    devices = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        devices.append(
            {
                "index": i,
                "name": p.name,
                "cc": f"{p.major}.{p.minor}",
                "sm": f"sm_{p.major}{p.minor}",
                "memory_bytes": int(p.total_memory),
                "multiprocessors": int(p.multi_processor_count),
            }
        )
    out: dict[str, Any] = {"cuda_available": True, "devices": devices}
    try:
        out["driver_cuda_version"] = torch._C._cuda_getDriverVersion()
    except Exception:
        out["driver_cuda_version"] = None
    return out


def smoke(torch: Any) -> dict[str, Any]:
    """A few real kernels on device 0: a matmul, a reduction, an elementwise op."""
    start = time.perf_counter()
    try:
        a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        c = (a @ b).float()
        ref = a.float().cpu() @ b.float().cpu()
        err = float((c.cpu() - ref).abs().max())
        s = float(torch.arange(1000, device="cuda", dtype=torch.float32).sum())
        torch.cuda.synchronize()
        return {
            "ok": err < 1.0 and s == 499500.0,
            "matmul_max_abs_err": err,
            "sum": s,
            "seconds": round(time.perf_counter() - start, 4),
        }
    except Exception as exc:
        return {"ok": False, "error": _error(exc)}


def probe_driver() -> str | None:
    try:
        with Path("/proc/driver/nvidia/version").open(encoding="utf-8") as fh:
            m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?(\d+\.\d+(?:\.\d+)?)", fh.read())
            return m.group(1) if m else None
    except OSError:
        return None


def probe_imports(names: list[str]) -> dict[str, Any]:
    import importlib.util

    out: dict[str, Any] = {}
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except Exception as exc:
            out[name] = {"installed": False, "error": _error(exc)}
            continue
        if spec is None:
            out[name] = {"installed": False}
            continue
        start = time.perf_counter()
        try:
            # a module printing on import must not corrupt the JSON on stdout
            with contextlib.redirect_stdout(sys.stderr):
                mod = importlib.import_module(name)
            out[name] = {
                "installed": True,
                "ok": True,
                "version": getattr(mod, "__version__", None),
                "file": getattr(mod, "__file__", None),
                "seconds": round(time.perf_counter() - start, 3),
            }
        except BaseException as exc:  # SystemExit/ImportError/OSError from native code alike
            out[name] = {
                "installed": True,
                "ok": False,
                "error": _error(exc),
                "traceback_tail": traceback.format_exc().splitlines()[-6:],
            }
    return out


def _import_quietly(name: str) -> dict[str, Any]:
    try:
        # a module printing on import must not corrupt the JSON on stdout
        with contextlib.redirect_stdout(sys.stderr):
            importlib.import_module(name)
    except BaseException as exc:  # SystemExit/ImportError/OSError from native code alike
        return {"module": name, "ok": False, "error": _error(exc)}
    return {"module": name, "ok": True}


def mapped_libraries(maps: str) -> list[str]:
    """Shared objects in /proc/self/maps text: absolute paths ending in .so or with .so."""
    found: set[str] = set()
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        path = fields[5].strip()
        if path.endswith(" (deleted)"):  # no str.removesuffix: older cell interpreters
            path = path[: -len(" (deleted)")]
        name = path.rsplit("/", 1)[-1]
        if path.startswith("/") and (name.endswith(".so") or ".so." in name):
            found.add(path)
    return sorted(found)


def _packages() -> list[str]:
    """Top-level packages in sys.modules, the standard library's left out."""
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    tops = {name.split(".", 1)[0] for name in list(sys.modules)}
    return sorted(t for t in tops if t not in stdlib and not t.startswith("_"))


def probe_serving(entry: list[str], model_load: list[str]) -> dict[str, Any]:
    """Import the serving path (the first entry module that imports, then what model
    loading imports), before anything else of this probe, and read which shared objects
    the process then has mapped. `imported` is None when no entry module imported:
    the mapped set then says nothing about the serving path."""
    attempts: list[dict[str, Any]] = []
    imported = None
    for name in entry:
        attempts.append(_import_quietly(name))
        if attempts[-1]["ok"]:
            imported = name
            break
    if imported is not None:
        attempts += [_import_quietly(name) for name in model_load]
    try:
        loaded = mapped_libraries(Path("/proc/self/maps").read_text(encoding="utf-8"))
    except OSError as exc:
        return {
            "modules": attempts,
            "imported": None,
            "loaded_libraries": None,
            "error": _error(exc),
        }
    return {
        "modules": attempts,
        "imported": imported,
        # top-level packages the serving imports brought in, mapped files or not (a pure
        # Python import such as flashinfer's loads its kernels later)
        "packages": _packages(),
        "loaded_libraries": loaded[:MAX_LOADED_LIBRARIES],
        "truncated": len(loaded) > MAX_LOADED_LIBRARIES,
    }


def _arg(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def _names(argv: list[str], flag: str) -> list[str]:
    """The comma-separated names after `flag`, none without it."""
    return [name for name in (_arg(argv, flag) or "").split(",") if name]


def serving_plan(argv: list[str]) -> tuple[str | None, list[str], list[str]]:
    """(engine, entry modules, model-load modules) from --engine, --serving-modules
    (the entry modules, in order: the first that imports is the serving path) and
    --model-load-modules (what loading the model imports, after the entry module)."""
    engine = _arg(argv, "--engine")
    return engine, _names(argv, "--serving-modules"), _names(argv, "--model-load-modules")


def main(argv: list[str]) -> int:
    libcuda, stubbed = libcuda_plan(argv)
    if stubbed is not None:
        sys.stdout.write(stubbed)
        return 0
    modules = _names(argv, "--modules")
    engine, entry, model_load = serving_plan(argv)
    # first: what the probe imports itself (torch, every extension module) is no
    # evidence of what the server loads
    serving = probe_serving(entry, model_load) if entry else None
    loaded = None
    if serving is not None:
        serving["engine"] = engine
        loaded = serving.pop("loaded_libraries")
    torch_info, torch = probe_torch()
    devices = probe_devices(torch)
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "python": {
            "version": platform.python_version(),
            "executable": sys.executable,
            "implementation": platform.python_implementation(),
        },
        "platform": {
            "machine": platform.machine(),
            "system": platform.system(),
            "libc": list(platform.libc_ver()),
        },
        "torch": torch_info,
        "gpu": devices,
        "driver": probe_driver(),
        "imports": probe_imports(modules),
        "env": behaviour_env(_arg(argv, LIBCUDA_DIR_FLAG)),
        "libcuda": libcuda,
        "serving": serving,
        "loaded_libraries": loaded,
    }
    if devices.get("cuda_available"):
        result["smoke"] = smoke(torch)
    else:
        result["smoke"] = {"ok": None, "skipped": "no CUDA device: nothing was run on a GPU"}
    sys.stdout.write(MARKER + json.dumps(result, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
