#!/bin/sh
# Installs what the packaging tests (ctest label "package", tests/package/)
# need beyond scripts/install-deps.sh, and nothing that is already there. Safe
# to run again. Uses sudo when not run as root.
#   dpkg-dev   dpkg-shlibdeps: cpack fills the .debs' Depends with it
#   file       cpack picks the ELF files for dpkg-shlibdeps with it
#   binutils   strip, for the packaged binaries
#   lintian    checks the .debs
#   systemd    systemd-analyze verify (the unit), systemd-sysusers (the user)
#   debootstrap        a minimal Debian 12 root for package.deb_boot_*
#   systemd-container  systemd-nspawn, which boots that root
#   curl               asks the Debian mirror first (the test skips without it)
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

PACKAGES="dpkg-dev file binutils lintian systemd debootstrap systemd-container curl"

# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-package $PACKAGES
