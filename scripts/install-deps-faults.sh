#!/bin/sh
# Installs what the fault tests (ctest label "faults", docs/reliability.md)
# need beyond scripts/install-deps.sh, and nothing that is already there.
# Safe to run again. Uses sudo when not run as root.
#   util-linux          unshare, mount: the disk-full and read-only tests
#   coreutils           timeout, sha256sum
#   clang, libclang-rt-14-dev   clang++ with libFuzzer and ASan (fuzz/)
#   patroni, etcd-server, python3-etcd, python3-psycopg2
#                       the Patroni test (label "patroni",
#                       tests/postgres/patroni_test.py); python3-etcd is the
#                       DCS client Patroni's etcd3 support builds on. The
#                       test runs etcd and patroni itself on ports of its
#                       own; the packages' system units (etcd on 2379 and
#                       2380 where systemd starts it) are not used.
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

PACKAGES="util-linux mount coreutils bash clang clang-14 libclang-rt-14-dev
  patroni etcd-server python3-etcd python3-psycopg2"

# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps-faults $PACKAGES
