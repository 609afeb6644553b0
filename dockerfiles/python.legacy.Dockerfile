# stackmatrix cell image on a base that already has python3 (Debian, python:*-slim...).
# Legacy-builder variant (DOCKER_BUILDKIT=0, no mounts): the venv is built in a
# throw-away stage, so the final image holds the base plus the venv only, not the
# build files (uv, plan, CA bundle) nor a download cache.
#
# The docker backend renders a build context holding this file and stackmatrix/:
#   install.py plan.json requirements.txt uv [ca-bundle.crt] [find-links/N/]
# Every value from the spec reaches the build as a file in stackmatrix/ or as the
# BASE_IMAGE build arg; no RUN line splices a spec value into shell text.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE} AS build
COPY stackmatrix /opt/stackmatrix/build
RUN ["python3", "/opt/stackmatrix/build/install.py", "/opt/stackmatrix/build/plan.json"]

FROM ${BASE_IMAGE}
COPY --from=build /opt/stackmatrix/venv /opt/stackmatrix/venv
ENV VIRTUAL_ENV=/opt/stackmatrix/venv \
    PATH=/opt/stackmatrix/venv/bin:${PATH}
