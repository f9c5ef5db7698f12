#!/bin/sh
# Three hilo_server processes on one PostgreSQL database under hilo_stress:
# kill -9 of servers in turn, and an immediate stop and start of PostgreSQL
# during the load. Passes when hilo_stress finds no number handed out twice
# in a collection across all nodes (tags ignored), no ID outside a range,
# and the stored Max at or above every high replied (run_stress.sh checks
# the summary).
#
#   fleet_test.sh HILO_STRESS HILO_SERVER
set -eu
stress=$1
server=$2
here=$(cd "$(dirname "$0")" && pwd)
temp_pg=$(cd "$here/../../testing" && pwd)/temp_postgres.sh
pg=$(mktemp -d "${TMPDIR:-/tmp}/hilo-fleet.XXXXXX")
trap '"$temp_pg" destroy "$pg/db"; rm -rf "$pg"' EXIT
uri=$("$temp_pg" start "$pg/db")

"$here/../faults/run_stress.sh" \
  "--expect= kills=3 " "--expect= kills_checked=3 " \
  "--expect= store_restarts=1 " \
  -- "$stress" "--server=$server" --store="$uri" --nodes=3 \
  --processes=2 --threads=4 --collections=3 --duration=20s \
  --return_every=5000 --new_collection_every=3000 --kill9=3 \
  --store_restarts=1 \
  --store_restart_command="'$temp_pg' stop '$pg/db' immediate && '$temp_pg' start '$pg/db' >/dev/null" \
  --rpc_deadline=2s --allow_errors=UNAVAILABLE
