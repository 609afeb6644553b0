"""The shared objects a live server mapped, from /proc/<pid>/maps."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from stackmatrix.bench._maps import server_mapped, shared_objects
from stackmatrix.findings import Finding, Severity
from stackmatrix.report.mapped import _unmapped


def test_only_shared_object_paths_are_kept() -> None:
    maps = "\n".join(
        [
            "7f00-7f01 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6",
            "7f01-7f02 r--p 00000000 08:01 124 /v/site-packages/sgl_kernel/common_ops.abi3.so",
            "7f02-7f03 r--p 00000000 08:01 125 /v/lib/python3.12/site-packages/x.so (deleted)",
            "7f03-7f04 rw-p 00000000 00:00 0 [heap]",
            "7f04-7f05 r--p 00000000 08:01 126 /usr/bin/python3.12",
            "7f05-7f06 r--p 00000000 08:01 127 /tmp/some file.so",
        ]
    )
    assert shared_objects(maps) == {
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/v/site-packages/sgl_kernel/common_ops.abi3.so",
        "/v/lib/python3.12/site-packages/x.so",
        "/tmp/some file.so",
    }


def test_a_process_group_of_our_own_is_read_across_its_processes() -> None:
    code = "import subprocess,sys,time; subprocess.Popen([sys.executable,'-c','import time;time.sleep(30)']); time.sleep(30)"  # noqa: E501
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        found = None
        for _ in range(200):  # until the child has started too (10 s at most)
            found = server_mapped(proc.pid)
            if found is not None and found.processes == 2:
                break
            time.sleep(0.05)
        assert found is not None and found.processes == 2  # the child's maps are read too
        assert any("libc.so" in p or "libpython" in p or ".so" in p for p in found.libraries)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_findings_on_files_the_server_never_mapped_are_named() -> None:
    so = "/v/site-packages/torchaudio/lib/_torchaudio.so"
    f = Finding(code="SM-ELF-UNREADABLE", severity=Severity.WARN, cell="c", subject=so, message="m")
    assert _unmapped((f,), {"sgl_kernel/common_ops.abi3.so"}) == ("torchaudio/lib/_torchaudio.so",)
    assert _unmapped((f,), {"torchaudio/lib/_torchaudio.so"}) == ()
