#!/bin/sh
# Installs the distribution's python3 (which the cell's venv is made from), the CA
# certificates and the system libraries the serving engine's extensions load, in a
# Debian/Ubuntu base. Fixed text: it takes no spec value except the CA bundle file next
# to it, which apt uses for https sources (the CUDA apt repo) behind a TLS-intercepting
# proxy.
set -eu
# The serving engine's system libraries, as sglang's own docker/Dockerfile installs them
# (there with their -dev packages, numactl and the InfiniBand tools): sgl-kernel's
# common_ops and mscclpp need libnuma.so.1, DeepEP, NVSHMEM and mooncake the RDMA
# userland. An image is its server's whole userland: without these the check finds the
# cell incompatible (SM-LIB-IMAGE-MISSING, packages named in compat/system_libs.toml).
serving="libnuma1 libibverbs1 librdmacm1 libibumad3 ibverbs-providers libnl-3-200 libnl-route-3-200"
here=$(dirname "$0")
ca_opt=""
if [ -s "$here/ca-bundle.crt" ]; then
    ca_opt="-oAcquire::https::CAInfo=$here/ca-bundle.crt"
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086  # ca_opt is one word or empty on purpose
apt-get $ca_opt update
# shellcheck disable=SC2086  # and serving is one word per package on purpose
apt-get $ca_opt install -y --no-install-recommends python3 ca-certificates $serving
# the package lists and apt's binary caches (~78 MB on Debian) are not the image's business;
# Debian's and Ubuntu's registry images drop them with a docker-clean hook, a debootstrap
# base has none (measured in issue 18)
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb
