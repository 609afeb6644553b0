"""Engine adapters: how to launch a server, when it is ready, what it really runs with.

Every engine is measured through its OpenAI-compatible `/v1/completions`; what
differs is the launch argv, the readiness probe and where the effective
configuration comes from. The flat `{setting: value}` view of that configuration is
what the report diffs between cells; the raw JSON is kept beside it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from stackmatrix import _proc, engine_registry
from stackmatrix.bench import _http
from stackmatrix.engine_registry import EngineTraits
from stackmatrix.jsontypes import JSONObject, JSONValue

log = logging.getLogger(__name__)

# Settings that change on every launch (the port we picked, runtime counters) and so
# would show as a difference between any two cells; left out of the flat view.
VOLATILE_KEYS = frozenset(
    {"port", "host", "nccl_port", "dist_init_addr", "internal_states", "metrics_port"}
)


@dataclass(frozen=True, kw_only=True)
class EffectiveConfig:
    """The configuration a server actually ran with."""

    version: str | None
    flat: JSONObject = field(default_factory=dict)
    raw: JSONObject = field(default_factory=dict)


class Engine:
    """Base adapter; subclasses fill in the engine-specific parts. What other modules
    ask about an engine (does it launch a server, its distributions, its serving
    modules) is its entry in `engine_registry`, found by `name`."""

    name: ClassVar[str] = ""
    traits: ClassVar[EngineTraits]
    needs_gpu: ClassVar[bool] = False
    accepts_ignore_eos: ClassVar[bool] = True
    ready_paths: ClassVar[tuple[str, ...]] = ("/health",)
    # Ports the engine derives from `--port` by adding these offsets (name -> offset);
    # the port we pick must leave them free and below 65536.
    derived_port_offsets: ClassVar[dict[str, int]] = {}
    # The endpoint (POST) that empties the server's prefix cache, where it has one, so
    # that every measured round starts cold (`bench.flush_cache`, docs/bench.md). None:
    # it keeps no prefix cache between requests, or it is not ours to empty.
    cache_flush_path: ClassVar[str | None] = None

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.traits = engine_registry.traits(cls.name)  # an adapter without an entry fails here

    @property
    def package(self) -> str | None:
        """The distribution whose version is the engine's."""
        return self.traits.package

    @property
    def launches_server(self) -> bool:
        """False for a server that runs outside the cell: nothing to start or stop."""
        return self.traits.launches_server

    def pinned_args(self, args: Sequence[str], *, seed: int) -> list[str]:
        """Flags added to every launch so that launches differ only in what cells ask.

        An engine that draws a fresh random value per launch (a sampling seed) would
        otherwise show it as a difference between any two cells.
        """
        del args, seed
        return []

    def flush_cache(self, base_url: str) -> str | None:
        """Empty the server's prefix cache: None when it did, else why it did not."""
        if self.cache_flush_path is None:
            return "the engine has no cache to flush"
        return post_until_ok(base_url + self.cache_flush_path)

    def module_argv(self, model: str, host: str, port: int) -> list[str]:
        """What follows the interpreter: `-m module ...` with model, host and port."""
        raise NotImplementedError

    def launch_argv(
        self, python: Sequence[str], model: str, host: str, port: int, args: Sequence[str]
    ) -> list[str]:
        return [*python, *self.module_argv(model, host, port), *args]

    def effective_config(
        self, base_url: str, *, launch_args: Sequence[str], env_version: str | None
    ) -> EffectiveConfig:
        flat = args_to_flat(launch_args)
        raw: JSONObject = {"launch_args": list(launch_args)}
        return EffectiveConfig(version=env_version, flat=flat, raw=raw)


class TransformersEngine(Engine):
    """`transformers serve` (transformers 5.x; its CLI module is transformers.cli.transformers).

    The model given as FORCE_MODEL is loaded before `/health` answers. It rejects
    `ignore_eos` with 422, so that field is never sent to it.
    """

    name = "transformers"
    accepts_ignore_eos = False
    ready_paths = ("/health",)

    def module_argv(self, model: str, host: str, port: int) -> list[str]:
        return [
            "-m",
            "transformers.cli.transformers",
            "serve",
            model,
            "--host",
            host,
            "--port",
            str(port),
        ]

    def effective_config(
        self, base_url: str, *, launch_args: Sequence[str], env_version: str | None
    ) -> EffectiveConfig:
        # transformers serve has no endpoint describing its settings: the flags we
        # passed and the installed version are all there is.
        flat: JSONObject = {
            "continuous_batching": False,
            "attn_implementation": None,
            "device": "auto",
        }
        flat |= args_to_flat(launch_args)
        flat["engine_version"] = env_version
        raw: JSONObject = {"launch_args": list(launch_args), "version": env_version}
        return EffectiveConfig(version=env_version, flat=flat, raw=raw)


class SglangEngine(Engine):
    """`python -m sglang.launch_server`; resolved server args from /server_info."""

    name = "sglang"
    needs_gpu = True
    ready_paths = ("/health_generate",)
    info_paths: ClassVar[tuple[str, ...]] = ("/server_info", "/get_server_info")
    # sglang 0.5.14 starts a gRPC server on --port + 10000 unless SGLANG_GRPC_PORT is
    # set, and refuses a --port above 55535 ("SGLANG_GRPC_PORT (68545) must be between
    # 1 and 65535"). Older versions ignore the extra room we leave.
    derived_port_offsets: ClassVar[dict[str, int]] = {"grpc": 10000}
    # `timeout`: since 0.5.x the scheduler waits that long for its running requests to
    # end instead of refusing at once; older versions ignore it (and are retried)
    cache_flush_path = "/flush_cache?timeout=30"

    def pinned_args(self, args: Sequence[str], *, seed: int) -> list[str]:
        # sglang draws `random_seed` per launch when none is given.
        given = any(a == "--random-seed" or a.startswith("--random-seed=") for a in args)
        return [] if given else ["--random-seed", str(seed)]

    def module_argv(self, model: str, host: str, port: int) -> list[str]:
        return [
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--host",
            host,
            "--port",
            str(port),
        ]

    def effective_config(
        self, base_url: str, *, launch_args: Sequence[str], env_version: str | None
    ) -> EffectiveConfig:
        info = first_json(base_url, self.info_paths)
        if info is None:
            return super().effective_config(
                base_url, launch_args=launch_args, env_version=env_version
            )
        version = info.get("version") or env_version
        return _from_info(info, version)


class VllmEngine(Engine):
    """`vllm serve` (via `python -m vllm.entrypoints.cli.main serve`); /health, /version."""

    name = "vllm"
    needs_gpu = True
    ready_paths = ("/health",)
    cache_flush_path = "/reset_prefix_cache"  # served with VLLM_SERVER_DEV_MODE=1 only

    def module_argv(self, model: str, host: str, port: int) -> list[str]:
        return [
            "-m",
            "vllm.entrypoints.cli.main",
            "serve",
            model,
            "--host",
            host,
            "--port",
            str(port),
        ]

    def effective_config(
        self, base_url: str, *, launch_args: Sequence[str], env_version: str | None
    ) -> EffectiveConfig:
        ver = _http.get_json(base_url + "/version")
        version = str(ver["version"]) if ver and ver.get("version") else env_version
        flat = args_to_flat(launch_args) | {"engine_version": version}
        raw: JSONObject = {"version": ver, "launch_args": list(launch_args)}
        return EffectiveConfig(version=version, flat=flat, raw=raw)


class ExternalEngine(Engine):
    """A server that is already running at `bench.url`; nothing is started or stopped.

    It asks the endpoints the known engines have, so an external sglang still
    reports its resolved server args.
    """

    name = "external"
    ready_paths = ("/health", "/v1/models")
    accepts_ignore_eos = True

    def module_argv(self, model: str, host: str, port: int) -> list[str]:
        raise TypeError("the external engine launches nothing")

    def effective_config(
        self, base_url: str, *, launch_args: Sequence[str], env_version: str | None
    ) -> EffectiveConfig:
        info = first_json(base_url, ("/server_info", "/get_server_info", "/version"))
        if info is None:
            return EffectiveConfig(version=None, flat={}, raw={})
        return _from_info(info, info.get("version"))


ENGINES: dict[str, type[Engine]] = {
    e.name: e for e in (TransformersEngine, SglangEngine, VllmEngine, ExternalEngine)
}


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]()
    except KeyError:
        known = ", ".join(sorted(ENGINES))
        raise ValueError(f"unknown engine {name!r}; known engines: {known}") from None


FLUSH_ATTEMPTS = 5  # a server still finishing the last request refuses (400) for a moment


def post_until_ok(url: str, *, attempts: int = FLUSH_ATTEMPTS, pause_s: float = 1.0) -> str | None:
    """POST to `url` until it answers 2xx: None then, else what the last answer was."""
    why = ""
    for attempt in range(attempts):
        status, body = _http.call(url, "POST", timeout_s=60.0)
        if 200 <= status < 300:
            return None
        text = body.decode("utf-8", "replace").strip().splitlines()
        why = f"HTTP {status}: {text[0][:200]}" if status and text else f"HTTP {status}"
        if status == 0:
            why = "no answer"
        # not answered (refused, or 60 s without an answer): the round will say more
        if status not in (400, 409, 503) or attempt == attempts - 1:
            break
        time.sleep(pause_s)
    path = url.split("/", 3)[-1]
    return f"POST /{path}: {why}"


def _from_info(info: JSONObject, version: JSONValue) -> EffectiveConfig:
    return EffectiveConfig(version=str(version) if version else None, flat=flatten(info), raw=info)


def first_json(base_url: str, paths: Sequence[str]) -> JSONObject | None:
    for path in paths:
        data = _http.get_json(base_url + path, timeout_s=10.0)
        if data is not None:
            return data
    return None


def flatten(data: Mapping[str, JSONValue], prefix: str = "") -> JSONObject:
    """Nested objects become dotted keys; launch-specific keys are dropped."""
    out: JSONObject = {}
    for key, value in data.items():
        if key in VOLATILE_KEYS:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= flatten(value, prefix=f"{name}.")
        else:
            out[name] = value
    return out


def args_to_flat(args: Sequence[str]) -> JSONObject:
    """Engine flags as settings.

    `--attn-implementation sdpa --no-compile` -> {"attn_implementation": "sdpa", "compile": False}
    """
    out: JSONObject = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            i += 1
            continue
        key, _, inline = arg[2:].partition("=")
        key = key.replace("-", "_")
        if inline:
            out[key] = inline
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[key] = args[i + 1]
            i += 1
        elif key.startswith("no_"):
            out[key[3:]] = False
        else:
            out[key] = True
        i += 1
    return {k: v for k, v in out.items() if k not in VOLATILE_KEYS}


def package_version(
    python: Sequence[str], package: str, *, env: Mapping[str, str] | None = None
) -> str | None:
    """The installed version of `package` in the environment that `python` runs."""
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    # 180 s: in a docker cell this is a `docker run`, which took up to 55 s on a busy host
    result = _proc.run([*python, "-c", code], timeout=180.0, env=env)
    if not result.ok:
        log.debug("no version for %s: %s", package, result.tail(3))
        return None
    lines = result.output.strip().splitlines()
    return lines[-1].strip() if lines else None
