#!/bin/sh
# Installs the distribution's python3 (which the cell's venv is made from) and the
# CA certificates in a Debian/Ubuntu base. Fixed text: it takes no spec value except
# the CA bundle file next to it, which apt uses for https sources (the CUDA apt repo)
# behind a TLS-intercepting proxy.
set -eu
here=$(dirname "$0")
ca_opt=""
if [ -s "$here/ca-bundle.crt" ]; then
    ca_opt="-oAcquire::https::CAInfo=$here/ca-bundle.crt"
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086  # ca_opt is one word or empty on purpose
apt-get $ca_opt update
# shellcheck disable=SC2086
apt-get $ca_opt install -y --no-install-recommends python3 ca-certificates
# the package lists and apt's binary caches (~78 MB on Debian) are not the image's business;
# Debian's and Ubuntu's registry images drop them with a docker-clean hook, a debootstrap
# base has none (measured in issue 18)
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb
