"""Every finding code the code can emit has a line in the docs (they are a contract:
CI policies and people grep for them)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r'code="(SM-[A-Z0-9-]+)"')


def test_every_emitted_code_is_documented() -> None:
    emitted = {
        m.group(1)
        for path in (ROOT / "src" / "stackmatrix").rglob("*.py")
        for m in CODE.finditer(path.read_text(encoding="utf-8"))
    }
    assert len(emitted) > 20  # the pattern still finds the codes
    docs = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    documented = set(re.findall(r"`(SM-[A-Z0-9-]+)`", docs))
    assert sorted(emitted - documented) == []
