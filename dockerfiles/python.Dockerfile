# stackmatrix cell image on a base that already has python3 (Debian, python:*-slim...).
# BuildKit variant: the build files are bind-mounted (never stored in a layer) and uv's
# download cache lives on a cache mount shared by every cell build.
#
# The docker backend renders a build context holding this file and stackmatrix/:
#   install.py plan.json requirements.txt uv [ca-bundle.crt] [find-links/N/]
# Every value from the spec reaches the build as a file in stackmatrix/ or as the
# BASE_IMAGE build arg; no RUN line splices a spec value into shell text.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
RUN --mount=type=cache,target=/root/.cache/uv,id=stackmatrix-uv \
    --mount=type=bind,source=stackmatrix,target=/opt/stackmatrix/build \
    ["python3", "/opt/stackmatrix/build/install.py", "/opt/stackmatrix/build/plan.json"]
ENV VIRTUAL_ENV=/opt/stackmatrix/venv \
    PATH=/opt/stackmatrix/venv/bin:${PATH}
