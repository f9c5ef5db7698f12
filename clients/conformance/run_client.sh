#!/bin/sh
# Runs the whole conformance suite against one client (what the
# conformance.<client> tests do):
#
#   run_client.sh CLIENT SERVER_BIN GEN_DIR WORK_DIR DRIVER
#
# DRIVER is the driver's executable, or build:<lang> to build it first with
# drivers/<lang>/build.sh GEN_DIR WORK_DIR/<lang> (which leaves
# WORK_DIR/<lang>/driver). GEN_DIR is scripts/gen-stubs.sh's output; the
# runner needs its Python stubs.
set -eu
if [ $# -ne 5 ]; then
  echo "usage: $0 CLIENT SERVER_BIN GEN_DIR WORK_DIR DRIVER" >&2
  exit 2
fi
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
client=$1 server=$2 gen=$3 work=$4 driver=$5
case "$driver" in
  build:*)
    lang=${driver#build:}
    if [ ! -x "$here/drivers/$lang/build.sh" ]; then
      echo "run_client.sh: no driver for $lang: $here/drivers/$lang/build.sh is missing" >&2
      exit 1
    fi
    mkdir -p "$work/$lang"
    "$here/drivers/$lang/build.sh" "$gen" "$work/$lang"
    driver=$work/$lang/driver
    ;;
esac
PYTHONPATH="$gen/python" PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 \
  "$here/run.py" --server "$server" --client "$client" --driver "$driver"
