"""The names kernels.py gives the kernels it reads (check/kernels.py, sglang#38515)."""

from __future__ import annotations

import pytest

from stackmatrix.check.kernels import cubin_kernels, readable_name


@pytest.mark.parametrize(
    ("mangled", "readable"),
    [
        ("_Z7rmsnormPfi", "rmsnorm"),
        ("_ZN3sgl7rmsnormIfEEvPT_i", "sgl::rmsnorm"),
        ("_ZL12silu_and_mulPfi", "silu_and_mul"),
        ("plain_c_kernel", "plain_c_kernel"),
        ("_Zbroken", "_Zbroken"),
    ],
)
def test_readable_name(mangled: str, readable: str) -> None:
    assert readable_name(mangled) == readable


def test_a_payload_that_is_no_cubin_is_refused() -> None:
    data = b"\x7fELF\x01\x01" + b"\0" * 58  # 32-bit: not a cubin
    with pytest.raises(ValueError, match="ELF64"):
        cubin_kernels(lambda pos, n: data[pos : pos + n], 0, len(data))
