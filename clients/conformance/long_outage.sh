#!/bin/sh
# The reconnect scenarios with a long outage, for every client at once (not
# run by ctest: each takes the outage's length, 180 s by default):
#
#   long_outage.sh BUILD_DIR [CLIENT...]
#
# Runs reconnects_soon_after_long_outage (the application calls all through
# the outage) and reconnects_soon_after_silent_outage (it calls nothing) for
# each CLIENT (default: cpp python go node java), all ten at once, since
# they mostly wait. BUILD_DIR is a CMake build directory with hilo_server,
# hilo_conformance_driver_cpp and the stubs (the lang.gen_stubs test); the
# other drivers are built first into BUILD_DIR/clients/conformance/work, as
# conformance.<client> builds them. Environment:
#   HILO_OUTAGE_MS    the outage (default 180000)
#   HILO_RECOVERY_MS  the bound on recovery after the node's return (default
#                     2000); raise it to see how long a slow client takes
# Prints each run's verdict and its note "ok after N ms" (from the node
# serving again to the first NextId that succeeded); exit status 1 if any
# run failed.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR [CLIENT...]" >&2
  exit 2
fi
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
build=$(CDPATH='' cd -- "$1" && pwd)
shift
[ $# -gt 0 ] || set -- cpp python go node java
gen=$build/tests/languages/gen
work=$build/clients/conformance/work
logs=$(mktemp -d "${TMPDIR:-/tmp}/hilo-long-outage.XXXXXX")
for client in "$@"; do
  if [ "$client" != cpp ]; then
    mkdir -p "$work/$client"
    "$here/drivers/$client/build.sh" "$gen" "$work/$client"
  fi
done
for client in "$@"; do
  driver=$work/$client/driver
  [ "$client" != cpp ] ||
    driver=$build/clients/conformance/hilo_conformance_driver_cpp
  for scenario in long silent; do
    PYTHONPATH="$gen/python" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 \
      "$here/run.py" --server "$build/service/hilo_server" \
      --client "$client" --scenario "reconnects_soon_after_${scenario}_outage" \
      --param "outage_ms=${HILO_OUTAGE_MS:-180000}" \
      --param "recovery_ms=${HILO_RECOVERY_MS:-2000}" \
      --driver "$driver" >"$logs/$client.$scenario" 2>&1 &
  done
done
wait
status=0
for client in "$@"; do
  for scenario in long silent; do
    grep -E '^[A-Z]+ |step 6' "$logs/$client.$scenario" || status=1
    ! grep -qE '^(FAIL|XPASS) ' "$logs/$client.$scenario" || status=1
  done
done
rm -rf "$logs"
exit $status
