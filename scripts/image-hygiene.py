"""Measure a built image's hygiene: size, layers, secrets, uv's cache.

usage: python scripts/image-hygiene.py IMAGE [IMAGE...] [--secret S]... [--out FILE.json]

For each image: its size and each layer's (`docker history`, and the bytes of each
layer tar), whether any `--secret` string appears in `docker history --no-trunc`, the
image config, or any file of any layer tar (`docker save`, streamed: nothing is written
to disk), whether a layer holds uv's cache (`.cache/uv`, uv's archive/wheel cache
directories), and two digests per layer that tell a reproducible rebuild from one that
only differs in timestamps: `content` (every member's path, type, mode, size, link and
sha256) and `meta` (the same plus mtime, uid and gid). Every command is an argv list.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

UV_CACHE_MARKERS = (".cache/uv/", "uv-cache/", "/archive-v0/", "/wheels-v5/", "/sdists-v9/")
CHUNK = 1 << 20


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def history(image: str) -> list[dict[str, Any]]:
    out = docker("history", "--no-trunc", "--human=false", "--format", "{{json .}}", image)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _chunks(fh: IO[bytes]) -> Iterator[bytes]:
    while chunk := fh.read(CHUNK):
        yield chunk


def scan_member(fh: IO[bytes], secrets: list[bytes]) -> tuple[str, list[str]]:
    """sha256 of a member's content and the secrets found in it (across chunk edges)."""
    digest = hashlib.sha256()
    found: set[str] = set()
    keep = max((len(s) for s in secrets), default=1) - 1
    tail = b""
    for chunk in _chunks(fh):
        digest.update(chunk)
        window = tail + chunk
        found.update(s.decode() for s in secrets if s in window)
        tail = window[-keep:] if keep else b""
    return digest.hexdigest(), sorted(found)


def scan_layer(fh: IO[bytes], secrets: list[bytes]) -> dict[str, Any]:
    content, meta = hashlib.sha256(), hashlib.sha256()
    files = size = 0
    hits: list[str] = []
    uv_files: dict[str, int] = {}  # uv cache directory -> files under it
    with tarfile.open(fileobj=fh, mode="r|") as layer:
        for m in layer:
            sha = ""
            if m.isfile():
                member = layer.extractfile(m)
                assert member is not None
                sha, found = scan_member(member, secrets)
                hits += [f"{m.name}: {s}" for s in found]
                files += 1
                size += m.size
            path = "/" + m.name.lstrip("./") + ("/" if m.isdir() else "")
            for marker in UV_CACHE_MARKERS:
                if marker in path:
                    prefix = path.split(marker)[0] + marker
                    # an empty directory is the cache mount's mount point, not a cache
                    uv_files[prefix] = uv_files.get(prefix, 0) + int(m.isfile())
            row = f"{m.name}\0{m.type!r}\0{m.mode:o}\0{m.size}\0{m.linkname}\0{sha}\n"
            content.update(row.encode())
            meta.update(f"{row}\0{m.mtime}\0{m.uid}\0{m.gid}\n".encode())
    return {
        "files": files,
        "bytes": size,
        "secret_hits": hits[:20],
        "uv_cache_paths": sorted(p for p, n in uv_files.items() if n)[:20],
        "empty_uv_cache_dirs": sorted(p for p, n in uv_files.items() if not n)[:20],
        "content_digest": content.hexdigest(),
        "meta_digest": meta.hexdigest(),
    }


def save_scan(image: str, secrets: list[bytes]) -> dict[str, Any]:
    """Every layer tar and the config of `docker save IMAGE`, streamed."""
    proc = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    layers: dict[str, Any] = {}
    config_hits: list[str] = []
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as outer:
            for m in outer:
                fh = outer.extractfile(m) if m.isfile() else None
                if fh is None:
                    continue
                if m.name.endswith("layer.tar") or m.name.startswith("blobs/"):
                    # an OCI layout's blobs/ also hold the config and manifests
                    with contextlib.suppress(tarfile.ReadError):
                        layers[m.name] = scan_layer(fh, secrets)
                elif m.name.endswith(".json"):
                    data = fh.read()
                    config_hits += [f"{m.name}: {s.decode()}" for s in secrets if s in data]
    finally:
        rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"docker save {image} failed with exit code {rc}")
    return {"layers": layers, "config_hits": config_hits}


def measure(image: str, secrets: list[str]) -> dict[str, Any]:
    info = json.loads(docker("image", "inspect", image))[0]
    hist = history(image)
    raw = [s.encode() for s in secrets]
    text = json.dumps(hist) + json.dumps(info)
    saved = save_scan(image, raw)
    return {
        "schema_version": 1,
        "image": image,
        "id": info["Id"],
        "size_bytes": info["Size"],
        "rootfs_layers": info["RootFS"]["Layers"],
        "history": [
            {"created_by": h.get("CreatedBy", "")[-160:], "size": h.get("Size")} for h in hist
        ],
        "secret_in_history_or_config": sorted(s for s in secrets if s in text),
        "secret_in_saved_config": saved["config_hits"],
        "layers": saved["layers"],
        "secret_in_layers": sorted({h for v in saved["layers"].values() for h in v["secret_hits"]}),
        "uv_cache_in_layers": sorted(
            {p for v in saved["layers"].values() for p in v["uv_cache_paths"]}
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("images", nargs="+")
    ap.add_argument("--secret", action="append", default=[], help="a string no layer may hold")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    results = [measure(image, args.secret) for image in args.images]
    for r in results:
        print(
            f"{r['image']}: {r['id'][:19]} {r['size_bytes'] / 1e9:.2f} GB, "
            f"{len(r['rootfs_layers'])} layers"
        )
        for h in r["history"]:
            print(f"  {int(h['size'] or 0) / 1e6:10.1f} MB  {h['created_by'][-90:]}")
        for name, layer in r["layers"].items():
            print(
                f"  layer {name[:24]}: {layer['files']} files, {layer['bytes'] / 1e9:.3f} GB, "
                f"content {layer['content_digest'][:12]} meta {layer['meta_digest'][:12]}"
            )
        print(
            f"  secret in history/config: {r['secret_in_history_or_config'] or 'none'}; "
            f"in layers: {r['secret_in_layers'] or 'none'}; "
            f"uv cache in layers: {r['uv_cache_in_layers'] or 'none'}"
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    bad = any(
        r["secret_in_history_or_config"]
        or r["secret_in_layers"]
        or r["secret_in_saved_config"]
        or r["uv_cache_in_layers"]
        for r in results
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
