# A local stand-in for nvidia/cuda:<version>-cudnn-devel-ubuntu24.04, for machines that
# reach PyPI and a Debian mirror but no container registry (issue 18).
#
# Debian bookworm (debootstrap minbase + python3, `docker import`ed) plus the CUDA
# runtime and compiler wheels from PyPI, laid out as /usr/local/cuda-<version> with the
# /usr/local/cuda link, the ld.so configuration and the environment an nvidia/cuda devel
# image has. docs/docker.md says what it has and lacks next to the real images.
# scripts/cuda-base.py renders the context (this file and cuda-base/: plan.json,
# install.py, uv, ca-bundle.crt) from a fixed table of CUDA versions; no spec value
# reaches it, and no RUN line is a shell string.
ARG DEBIAN_BASE=stackmatrix-test/bookworm-python:1
FROM ${DEBIAN_BASE}
ARG CUDA_VERSION
RUN --mount=type=bind,source=cuda-base,target=/opt/cuda-base-build \
    ["python3", "/opt/cuda-base-build/install.py", "/opt/cuda-base-build/plan.json"]
# What nvidia/cuda's devel images set (PATH, LD_LIBRARY_PATH for the driver libraries
# that the NVIDIA container toolkit mounts, NVIDIA_* for that toolkit, CUDA_VERSION),
# plus CUDA_HOME, which they leave to the /usr/local/cuda default: set here so that
# flashinfer's and torch's JIT find the toolkit without guessing.
ENV CUDA_VERSION=${CUDA_VERSION} \
    CUDA_HOME=/usr/local/cuda \
    PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL org.opencontainers.image.title="stackmatrix local CUDA base (PyPI wheels on Debian bookworm)"
