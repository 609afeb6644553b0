#!/usr/bin/env python3
"""Repack the distributions installed in a directory into wheels (stdlib only).

    python3 scripts/kit-wheels.py SITE_DIR WHEEL_DIR

An offline kit (../shared/gpu-kit) arrives as an unpacked site directory with some
large files removed (FA3's flash_ops, the sm100 build). An air-gapped host's cells are
venvs that install their pins from a local wheel directory, so this makes
that directory there: one wheel per `*.dist-info`, holding the files its RECORD lists
that still exist (a removed file stays removed), with a fresh RECORD. Files outside
the directory (console scripts) and byte-code are left out. Stored, not compressed:
the wheels only travel from one local directory to another.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

_DROP = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def _digest(data: bytes) -> str:
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _tag(info: Path) -> str:
    wheel = Parser().parsestr((info / "WHEEL").read_text(encoding="utf-8"))
    tags = [t.split("-") for t in wheel.get_all("Tag") or ["py3-none-any"]]
    # compressed tag set: each part joins the distinct values of all tags with "."
    return "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))


def _files(site: Path, info: Path) -> list[str]:
    with (info / "RECORD").open(encoding="utf-8", newline="") as fh:
        rows = [row[0] for row in csv.reader(fh) if row]
    keep = []
    for rel in rows:
        path = site / rel
        if rel.startswith(("../", "/")) or "__pycache__/" in rel or rel.endswith(".pyc"):
            continue
        if Path(rel).parent.name == info.name and Path(rel).name in _DROP:
            continue
        if path.is_file() and not path.is_symlink():
            keep.append(rel)
    return keep


def repack(site: Path, info: Path, out: Path) -> Path:
    meta = Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
    name = str(meta["Name"]).replace("-", "_").replace(".", "_")
    version = str(meta["Version"])
    wheel = out / f"{name}-{version}-{_tag(info)}.whl"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED) as zf:
        for rel in _files(site, info):
            data = (site / rel).read_bytes()
            zf.writestr(rel, data)
            writer.writerow([rel, _digest(data), len(data)])
        writer.writerow([f"{info.name}/RECORD", "", ""])
        zf.writestr(f"{info.name}/RECORD", record.getvalue())
    return wheel


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: kit-wheels.py SITE_DIR WHEEL_DIR", file=sys.stderr)
        return 2
    site, out = Path(argv[0]), Path(argv[1])
    infos = sorted(site.glob("*.dist-info"))
    if not infos:
        print(f"kit-wheels: no *.dist-info in {site}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for info in infos:
        print(repack(site, info, out).name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
