#!/bin/sh
# Installs what hilo needs to build and test on Debian 12, and nothing that is
# already there. Safe to run again. Uses sudo when not run as root.
# (Only the server: scripts/install-deps-server.sh.)
set -eu
. "$(dirname "$0")/apt-install-missing.sh"

# What building and running the server needs.
"$(dirname "$0")/install-deps-server.sh"

# clang: the thread-safety preset checks the lock annotations with it.
PACKAGES="
  git ca-certificates openssl clang clang-format sqlite3
  libgtest-dev libgmock-dev python3-grpcio
  postgresql
  prometheus
"


# shellcheck disable=SC2086  # a list of package names
apt_install_missing install-deps $PACKAGES

# What the other-language examples and tests need (tests labelled "lang").
"$(dirname "$0")/install-deps-languages.sh"

# What the container image and Kubernetes tests need (tests labelled "deploy").
"$(dirname "$0")/install-deps-deploy.sh"

# What the fault tests need (tests labelled "faults").
"$(dirname "$0")/install-deps-faults.sh"

# What the abuse tests need (tests labelled "abuse").
"$(dirname "$0")/install-deps-abuse.sh"

# What the benchmarks need (tests labelled "bench").
"$(dirname "$0")/install-deps-bench.sh"

# What the packaging tests need (tests labelled "package").
"$(dirname "$0")/install-deps-package.sh"
