"""The `docker` backend: one image per cell, built from dockerfiles/, tagged by content hash.

`build` renders the cell's build context, runs `docker build --network=host` with the
log streamed into the cell's build log, reads the installed distributions back from
inside the image, and exports the image's filesystem so the static compat scan sees
the image's system libraries. An image whose tag (the content hash) exists is reused.

`container_command` / `remove_container` / `removing` are for the bench phase: they
start the engine in a container labelled as ours and remove it, and only it, on
every exit path (they live in `_docker_containers`; this module re-exports them).

Secrets (anything whose name says TOKEN, SECRET, PASSWORD...) never reach a build:
not as build args, not in files, not in the log. They reach a running container by
name only (`--env NAME`), the docker client passing on the value from this
process's environment, so they are not in any argv or report either.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from pathlib import Path

from stackmatrix import _proc
from stackmatrix._secrets import has_credentials, is_secret_name, redact_files
from stackmatrix.builder import _docker_cli, _docker_context, _docker_rootfs
from stackmatrix.builder._docker_cli import ContainerEngine, EngineProblem, ImageInfo
from stackmatrix.builder._docker_containers import (
    OWNER_LABEL,
    PASS_ENV,
    container_command,
    default_owner,
    python_command,
    remove_container,
    removing,
)
from stackmatrix.builder._docker_context import (
    COMPILED_NAME,
    IMAGE_PYTHON,
    VENV_PATH,
    ContextError,
)
from stackmatrix.builder.base import BuildOutcome, Environment, LockEntry
from stackmatrix.findings import Finding, Severity
from stackmatrix.jsontypes import JSONObject
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell

__all__ = [
    "IMAGE_PYTHON",
    "OWNER_LABEL",
    "PASS_ENV",
    "VENV_PATH",
    "build",
    "container_command",
    "default_owner",
    "image_tag",
    "python_command",
    "remove_container",
    "removing",
]

log = logging.getLogger(__name__)

BUILD_TIMEOUT_S = 4 * 3600.0  # real CUDA stacks pull several GB of wheels
INVENTORY_TIMEOUT_S = 300.0
_NO_PYTHON = re.compile(r"(python3?)[^\n]*(executable file not found|no such file or directory)")


def image_tag(cell: Cell, content_hash: str) -> str:
    """`stackmatrix/<cell>:<hash12>`; the cell id made a valid docker repository name."""
    repo = re.sub(r"[^a-z0-9._-]+", "-", cell.id.lower()).strip("._-") or "cell"
    return f"stackmatrix/{repo}:{content_hash[:12]}"


def build(
    cell: Cell, *, spec_dir: Path, work_dir: Path, log_path: Path, content_hash: str
) -> BuildOutcome:
    """Build (or reuse) the cell's image and describe it; never raises for a failed
    build, a missing engine or an image without Python: those are statuses."""
    engine = _docker_cli.probe_engine()
    if isinstance(engine, EngineProblem):
        _log(log_path, engine.message)
        return _failed("docker_unavailable", engine.message)
    tag = image_tag(cell, content_hash)
    cell_dir = work_dir / "docker" / cell.id
    timings: dict[str, float] = {}
    image = _docker_cli.image_info(engine.docker, tag)
    stale = _docker_cli.base_changed(engine.docker, image) if image is not None else None
    if stale is not None:
        _log(log_path, f"rebuilding {tag}: {stale}")
        image = None
    reused = image is not None
    if image is None:
        built = _build_image(engine, cell, spec_dir, cell_dir, log_path, tag, content_hash)
        if isinstance(built, BuildOutcome):
            return built
        image, timings["build"] = built
    else:
        _log(log_path, f"reused image {tag}: content hash {content_hash[:12]} unchanged")
    return _describe(engine, cell, image, tag, cell_dir, log_path, reused, timings)


_Built = tuple[ImageInfo, float]  # the inspected image and the build's duration


def _build_image(
    engine: ContainerEngine,
    cell: Cell,
    spec_dir: Path,
    cell_dir: Path,
    log_path: Path,
    tag: str,
    content_hash: str,
) -> _Built | BuildOutcome:
    urls = (*cell.pins, cell.index_url or "", *cell.extra_index_urls, *cell.find_links)
    if not engine.buildkit and has_credentials(*urls):
        message = (
            "the cell's pins or index URLs carry credentials, and the legacy builder would "
            "keep them in a layer of the build stage; build with BuildKit (docker buildx), "
            "or give uv the credentials another way (a netrc file in the base image)"
        )
        _log(log_path, message)
        return _failed("build_failed", message)
    try:
        ctx = _docker_context.render(
            cell, spec_dir=spec_dir, dest=cell_dir / "context", buildkit=engine.buildkit
        )
    except ContextError as exc:
        _log(log_path, str(exc))
        return _failed("build_failed", str(exc))
    try:
        return _run_build(engine, cell, ctx, log_path, tag, content_hash)
    finally:
        # the context stays for the user to read, without the credentials it carried
        files = ctx.path / "stackmatrix"
        redact_files(files / "requirements.txt", files / "plan.json")


def _run_build(
    engine: ContainerEngine,
    cell: Cell,
    ctx: _docker_context.DockerContext,
    log_path: Path,
    tag: str,
    content_hash: str,
) -> _Built | BuildOutcome:
    argv = [
        engine.docker,
        "build",
        "--network=host",
        "-f",
        str(ctx.dockerfile),
        "-t",
        tag,
        "--build-arg",
        f"BASE_IMAGE={ctx.base_image}",
        "--label",
        f"stackmatrix.cell={cell.id}",
        "--label",
        f"stackmatrix.content_hash={content_hash}",
        "--label",
        f"stackmatrix.base_image={ctx.base_image}",
    ]
    if not engine.buildkit:
        # the legacy builder keeps a failed step's container unless told otherwise
        argv.append("--force-rm")
    argv.append(str(ctx.path))
    mode = "BuildKit" if engine.buildkit else "the legacy builder"
    log.info("%s: building image %s on %s with %s", cell.id, tag, ctx.base_image, mode)
    res = _docker_cli.run_streaming(
        argv, log_path=log_path, timeout=BUILD_TIMEOUT_S, env=_docker_cli.build_env(engine)
    )
    if not res.ok:
        return _build_failed(cell, res, ctx.base_image)
    image = _docker_cli.image_info(engine.docker, tag)
    if image is None:
        return _failed("build_failed", f"docker build said it built {tag}, but it is not there")
    return image, round(res.duration_s, 3)


def _build_failed(cell: Cell, res: _proc.ProcResult, base: str) -> BuildOutcome:
    tail = res.tail(15)
    if res.timed_out:
        return _failed("build_failed", f"docker build timed out after {BUILD_TIMEOUT_S:.0f}s")
    if _NO_PYTHON.search(res.output):
        return _failed(
            "no_python",
            f"the base image {base!r} has no python3, which the cell's venv is made from; "
            "use a base with python3 (e.g. python:3.12-slim) or an nvidia/cuda base, whose "
            f"template installs it. docker build said:\n{tail}",
        )
    hint = ""
    if re.search(r"pull access denied|failed to resolve|not found: manifest|no such host", tail):
        hint = (
            f"\nthe base image {base!r} is neither on this machine nor pullable from here; "
            "`docker pull` or `docker load` it first, or set base_image to an image you have"
        )
    finding = Finding(
        code="SM-DOCKER-BUILD-FAILED",
        severity=Severity.FAIL,
        cell=cell.id,
        subject=base,
        message=f"docker build failed for cell {cell.id!r} (see the build log); it said:\n"
        f"{tail}{hint}",
    )
    return _failed("build_failed", finding.message, (finding,))


def _describe(
    engine: ContainerEngine,
    cell: Cell,
    image: ImageInfo,
    tag: str,
    cell_dir: Path,
    log_path: Path,
    reused: bool,
    timings: dict[str, float],
) -> BuildOutcome:
    image_id = image.id
    started = time.monotonic()
    try:
        with _docker_rootfs.created_container(
            engine.docker,
            tag,
            [IMAGE_PYTHON, "-"],
            log_path=log_path,
            owner=f"{OWNER_LABEL}=stackmatrix",
        ) as container:
            inventory = _inventory(engine, container, tag, log_path)
            if isinstance(inventory, BuildOutcome):
                return inventory
            timings["inventory"] = round(time.monotonic() - started, 3)
            started = time.monotonic()
            root = _docker_rootfs.export_rootfs(
                engine.docker, container, image_id, work_dir=cell_dir, log_path=log_path
            )
            timings["export"] = round(time.monotonic() - started, 3)
    except _docker_rootfs.ExportError as exc:
        return _failed("export_failed", f"{tag}: {exc}")
    lock = _lock(cell, inventory, root)
    environment = _environment(engine, cell, tag, root)
    what = "reused existing image" if reused else "built image"
    return BuildOutcome(
        status=Status.OK,
        environment=environment,
        message=f"{what} {tag} ({image_id[:19]}, {len(lock)} distributions)",
        lock=tuple(lock),
        findings=tuple(_findings(cell, lock)),
        reused=reused,
        data=_data(engine, image, tag, root, timings),
    )


def _inventory(
    engine: ContainerEngine, container: str, tag: str, log_path: Path
) -> str | BuildOutcome:
    """What lockscript.py prints when run by the image's venv python."""
    from stackmatrix.builder.lock import lockscript_path

    script = lockscript_path().read_bytes()
    res = _docker_rootfs.start_attached(engine.docker, container, script, INVENTORY_TIMEOUT_S)
    if res.ok:
        return res.output
    _log(log_path, f"$ {' '.join(res.argv)}\n{res.output}")
    if _NO_PYTHON.search(res.output) or "executable file not found" in res.output:
        return _failed(
            "no_python",
            f"the image {tag} has no {IMAGE_PYTHON}; it was not built by this stackmatrix "
            f"(or its venv was removed): delete it with `docker rmi {tag}` and build again",
        )
    return _failed("inventory_failed", f"listing the image's distributions failed:\n{res.tail(8)}")


def _lock(cell: Cell, inventory: str, root: Path) -> list[LockEntry]:
    from stackmatrix.builder.lock import parse_compiled, parse_lockscript_output

    compiled_file = root / VENV_PATH.lstrip("/") / COMPILED_NAME
    compiled = parse_compiled(compiled_file.read_text()) if compiled_file.is_file() else {}
    return parse_lockscript_output(_json_line(inventory), cell, compiled)


def _json_line(text: str) -> str:
    """The JSON document in the output (the image may print warnings around it)."""
    for line in text.splitlines():
        if line.startswith("{"):
            return line
    return text


def _findings(cell: Cell, lock: Sequence[LockEntry]) -> list[Finding]:
    from stackmatrix.builder.resolver_drift import detect_drift

    findings = list(detect_drift(cell, lock))
    for name, _ in cell.env:
        if is_secret_name(name):
            findings.append(
                Finding(
                    code="SM-DOCKER-SECRET-IN-SPEC",
                    severity=Severity.WARN,
                    cell=cell.id,
                    subject=name,
                    message=f"the cell's env sets {name}, which looks like a secret; the "
                    "docker backend keeps it out of images, builds and reports. Set it in "
                    "the environment that runs stackmatrix instead (it is passed to "
                    "containers by name) and remove it from the spec",
                )
            )
    return findings


def _environment(engine: ContainerEngine, cell: Cell, tag: str, root: Path) -> Environment:
    site = sorted((root / VENV_PATH.lstrip("/") / "lib").glob("python3*/site-packages"))
    gpus = ["--gpus", "all"] if cell.gpus > 0 else []
    python = (
        engine.docker,
        "run",
        "--rm",
        "-i",
        "--network=host",
        *gpus,
        "--label",
        f"{OWNER_LABEL}=stackmatrix",
        tag,
        IMAGE_PYTHON,
    )
    return Environment(
        backend="docker",
        python=python,
        prefix=None,
        site_packages=tuple(site),
        root=root,
        image=tag,
        env={k: v for k, v in cell.env if not is_secret_name(k)},
    )


def _data(
    engine: ContainerEngine, image: ImageInfo, tag: str, root: Path, timings: dict[str, float]
) -> JSONObject:
    base_ref = image.labels.get(_docker_cli.BASE_LABEL, "")
    base = _docker_cli.image_info(engine.docker, base_ref) if base_ref else None
    return {
        "image": tag,
        "image_id": image.id,
        "size_bytes": image.size,
        "created": image.created,
        "base_image": {
            "ref": base_ref,
            "id": base.id if base else None,
            # an image made with `docker import` or `docker build` has no registry digest
            "repo_digests": list(base.repo_digests) if base else [],
        },
        "docker": {
            "client": engine.client_version,
            "server": engine.server_version,
            "buildkit": engine.buildkit,
        },
        "rootfs": str(root),
        "timings": dict(timings),
    }


def _failed(code: str, message: str, findings: tuple[Finding, ...] = ()) -> BuildOutcome:
    return BuildOutcome.failed(code, message, findings=findings)


def _log(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")
