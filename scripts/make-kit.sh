#!/usr/bin/env bash
# make-kit.sh PINS_FILE OUTDIR: an offline SGLang kit for the GPU host from a pinned
# wheel list (scripts/kits/sglang-*.pins: "name==version sha256 wheel" per line).
# It runs the project's kit maker (../shared/gpu-kit/make-sglang-kit.sh, or $KIT_SCRIPT)
# with its wheel list replaced by PINS_FILE; everything else (download checks, removed
# files, xz parts, MANIFEST) is that script's.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bash scripts/make-kit.sh PINS_FILE OUTDIR" >&2; exit 2; }
pins=$1 out=$2
maker=${KIT_SCRIPT:-$(dirname "$0")/../../shared/gpu-kit/make-sglang-kit.sh}
[ -f "$maker" ] || { echo "make-kit: no kit maker at $maker (set KIT_SCRIPT)" >&2; exit 2; }
[ -f "$pins" ] || { echo "make-kit: no pins file $pins" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$maker" "$pins" "$tmp/make.sh" <<'PY'
import sys
from pathlib import Path
maker, pins, dest = (Path(a) for a in sys.argv[1:])
text = maker.read_text()
start = text.index("PINS=(") + len("PINS=(")
end = text.index("\n)\n", start)
lines = [l.strip() for l in pins.read_text().splitlines() if l.strip() and not l.startswith("#")]
for line in lines:
    if len(line.split()) != 3 or "==" not in line.split()[0]:
        sys.exit(f"make-kit: {pins}: not 'name==version sha256 wheel': {line!r}")
body = "\n" + "\n".join(f'"{l}"' for l in lines)
dest.write_text(text[:start] + body + text[end:])
PY
bash "$tmp/make.sh" "$out"
