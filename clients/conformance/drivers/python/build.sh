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
if [ $# -ne 2 ]; then
  echo "usage: $0 GEN_DIR OUT_DIR" >&2
  exit 2
fi
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
root=$(CDPATH='' cd -- "$here/../../../.." && pwd)
gen=$(CDPATH='' cd -- "$1" && pwd)
if [ ! -f "$gen/python/hilo/v1/hilo_pb2_grpc.py" ]; then
  echo "build.sh: no Python stubs in $gen/python; run scripts/gen-stubs.sh $gen python" >&2
  exit 1
fi
mkdir -p "$2"
out=$(CDPATH='' cd -- "$2" && pwd)
cat >"$out/driver" <<SCRIPT
#!/bin/sh
PYTHONPATH="$gen/python:$root/clients/python" PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 "$here/driver.py" "\$@"
SCRIPT
chmod +x "$out/driver"
