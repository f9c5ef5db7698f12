#!/bin/sh
# Installs what the fault tests (ctest label "faults", docs/reliability.md)
# need beyond scripts/install-deps.sh, and nothing that is already there.
# Safe to run again. Uses sudo when not run as root.
#   util-linux          unshare, mount: the disk-full and read-only tests
#   coreutils           timeout, sha256sum
#   clang, libclang-rt-14-dev   clang++ with libFuzzer and ASan (fuzz/)
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

PACKAGES="util-linux mount coreutils bash clang clang-14 libclang-rt-14-dev"

# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-faults $PACKAGES
