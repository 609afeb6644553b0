# stackmatrix cell image on an NVIDIA CUDA base (nvidia/cuda:<ver>-cudnn-devel-ubuntu24.04).
# The CUDA toolkit, cuDNN, nvcc (flashinfer JIT-compiles with it) and the system
# libraries come from the base; python3 and the serving engine's system libraries
# (libnuma1, the RDMA userland: system-python.sh) come from the distribution (Ubuntu
# 24.04's python3 is 3.12, so cells on these bases use python = "3.12"); the pins come
# from the cell.
# BuildKit variant: the build files are bind-mounted (never stored in a layer) and uv's
# download cache lives on a cache mount shared by every cell build.
#
# The docker backend renders a build context holding this file and stackmatrix/:
#   install.py plan.json requirements.txt uv system-python.sh [ca-bundle.crt] [find-links/N/]
# Every value from the spec reaches the build as a file in stackmatrix/ or as the
# BASE_IMAGE build arg; no RUN line splices a spec value into shell text.
ARG BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04
FROM ${BASE_IMAGE}
RUN --mount=type=bind,source=stackmatrix,target=/opt/stackmatrix/build \
    ["/bin/sh", "/opt/stackmatrix/build/system-python.sh"]
RUN --mount=type=cache,target=/root/.cache/uv,id=stackmatrix-uv \
    --mount=type=bind,source=stackmatrix,target=/opt/stackmatrix/build \
    ["python3", "/opt/stackmatrix/build/install.py", "/opt/stackmatrix/build/plan.json"]
ENV VIRTUAL_ENV=/opt/stackmatrix/venv \
    PATH=/opt/stackmatrix/venv/bin:${PATH}
