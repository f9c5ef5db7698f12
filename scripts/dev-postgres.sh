#!/bin/sh
# A throwaway local PostgreSQL 15 to try hilo's shared store with: the same
# cluster the tests start (testing/temp_postgres.sh), kept in
# build/dev-postgres (or $HILO_DEV_POSTGRES_DIR), listening on 127.0.0.1 on a
# free port, trusting local connections. For trying things, never for data
# you want to keep.
#
#   scripts/dev-postgres.sh start     # creates it on first use, prints the URI
#   scripts/dev-postgres.sh uri       # prints the URI of the running cluster
#   scripts/dev-postgres.sh stop      # stops it; start again keeps the data
#   scripts/dev-postgres.sh destroy   # stops it and removes everything
#
# Then:  build/release/service/hilo_server --store="$(scripts/dev-postgres.sh uri)"
set -eu
root=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
dir=${HILO_DEV_POSTGRES_DIR:-"$root/build/dev-postgres"}
temp_postgres="$root/testing/temp_postgres.sh"

case "${1:-}" in
  start)
    mkdir -p "$(dirname "$dir")"
    "$temp_postgres" start "$dir"
    ;;
  uri)
    if [ -f "$dir/uri" ] && [ -f "$dir/data/postmaster.pid" ]; then
      cat "$dir/uri"
    else
      echo "dev-postgres: not running (scripts/dev-postgres.sh start)" >&2
      exit 1
    fi
    ;;
  stop)
    [ -f "$dir/data/postmaster.pid" ] || { echo "dev-postgres: not running"; exit 0; }
    "$temp_postgres" stop "$dir"
    echo "dev-postgres: stopped ($dir kept; destroy removes it)"
    ;;
  destroy)
    "$temp_postgres" destroy "$dir"
    echo "dev-postgres: removed $dir"
    ;;
  *)
    sed -n '2,13p' "$0" >&2
    exit 2
    ;;
esac
