#!/bin/sh
# Builds the Python client's conformance driver:
#
#   build.sh GEN_DIR OUT_DIR
#
# GEN_DIR is scripts/gen-stubs.sh's output (GEN_DIR/python holds the hilo.v1
# stubs). Leaves OUT_DIR/driver, an executable that runs driver.py with
# Debian's /usr/bin/python3 (which has grpcio), the stubs and clients/python
# on its path. Nothing is copied: the driver runs from the source tree.
set -eu
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
root=$(CDPATH='' cd -- "$here/../../../.." && pwd)
# shellcheck source=scripts/build_lib.sh
. "$root/scripts/build_lib.sh"
hilo_args 2 "GEN_DIR OUT_DIR" "$@"
gen=$(CDPATH='' cd -- "$1" && pwd)
if [ ! -f "$gen/python/hilo/v1/hilo_pb2_grpc.py" ]; then
  echo "build.sh: no Python stubs in $gen/python; run scripts/gen-stubs.sh $gen python" >&2
  exit 1
fi
out=$(hilo_dir "$2")
hilo_wrapper "$out/driver" env PYTHONPATH="$gen/python:$root/clients/python" \
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$here/driver.py"
