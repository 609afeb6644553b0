# stackmatrix cell image on an NVIDIA CUDA base (nvidia/cuda:<ver>-cudnn-devel-ubuntu24.04).
# The CUDA toolkit, cuDNN, nvcc (flashinfer JIT-compiles with it) and the system
# libraries come from the base; python3 and the serving engine's system libraries
# (libnuma1, the RDMA userland: system-python.sh) come from the distribution (Ubuntu
# 24.04's python3 is 3.12, so cells on these bases use python = "3.12"); the pins come
# from the cell.
# Legacy-builder variant (DOCKER_BUILDKIT=0, no mounts): the venv is built in a
# throw-away stage, so the final image holds the system stage plus the venv only.
#
# The docker backend renders a build context holding this file and stackmatrix/:
#   install.py plan.json requirements.txt uv system-python.sh [ca-bundle.crt] [find-links/N/]
# Every value from the spec reaches the build as a file in stackmatrix/ or as the
# BASE_IMAGE build arg; no RUN line splices a spec value into shell text.
ARG BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04
FROM ${BASE_IMAGE} AS system
COPY stackmatrix/system-python.sh stackmatrix/ca-bundle.crt /opt/stackmatrix/system/
RUN ["/bin/sh", "/opt/stackmatrix/system/system-python.sh"]

FROM system AS build
COPY stackmatrix /opt/stackmatrix/build
RUN ["python3", "/opt/stackmatrix/build/install.py", "/opt/stackmatrix/build/plan.json"]

FROM system
COPY --from=build /opt/stackmatrix/venv /opt/stackmatrix/venv
ENV VIRTUAL_ENV=/opt/stackmatrix/venv \
    PATH=/opt/stackmatrix/venv/bin:${PATH}
