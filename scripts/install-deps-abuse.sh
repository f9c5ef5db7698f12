#!/bin/sh
# Installs what the abuse tests (ctest label "abuse", tests/abuse/) need
# beyond scripts/install-deps.sh, and nothing that is already there. Safe to
# run again. Uses sudo when not run as root.
#   python3-h2      a raw HTTP/2 client: the attacks write frames by hand
#   python3-grpcio  the well-behaved bystander client
#   util-linux      prlimit: the server runs with few descriptors
#   nginx, openssl  the proxy docs/security.md puts in front of hilo, run by
#                   the proxy_* tests with a certificate made for the test
#                   (under systemd the package also enables Debian's own
#                   nginx service with its default site on port 80; the
#                   tests neither use nor need it)
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

PACKAGES="python3-h2 python3-grpcio util-linux nginx openssl"

# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-abuse $PACKAGES
