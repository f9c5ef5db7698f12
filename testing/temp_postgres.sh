#!/bin/sh
# A throwaway PostgreSQL 15 cluster for the tests, from Debian's postgresql
# package: its data, socket and log live in DIR, it listens on 127.0.0.1 on a
# free port, and trusts local connections as user "postgres".
#
#   temp_postgres.sh start DIR           # creates the cluster on first use;
#                                        # prints the connection URI (and
#                                        # writes it to DIR/uri)
#   temp_postgres.sh stop DIR [MODE]     # MODE: fast (default) or immediate
#   temp_postgres.sh destroy DIR         # stops it (immediate), removes DIR
#
# $HILO_PG_OPTIONS adds server options to start, e.g. "-c max_connections=300".
#
# As root, the server runs as the unprivileged user postgres (PostgreSQL
# refuses to run as root): DIR is given to that user, and its parent made
# searchable by it. The C++ tests
# (testing/postgres_instance.h) and the shell fault tests both use this.
set -eu

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,16p' "$0" >&2; exit 2; }
bin=${HILO_PG_BIN:-/usr/lib/postgresql/15/bin}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_ctl_in() {
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" "$@"
}

free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

case "$cmd" in
  start)
    [ -x "$bin/initdb" ] || {
      echo "temp_postgres: $bin/initdb is missing; run scripts/install-deps.sh (package postgresql)" >&2
      exit 1
    }
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then
      # The server's user must reach DIR through its (scratch) parent.
      chmod a+x "$(dirname "$dir")"
      chown postgres: "$dir"
    fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 \
        --no-instructions >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
      }
    fi
    [ -f "$dir/port" ] || free_port >"$dir/port"
    port=$(cat "$dir/port")
    # The port was free a moment ago; another process may take it first.
    if ! pg_ctl_in -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 ${HILO_PG_OPTIONS:-}" \
        start >/dev/null; then
      tail -n 20 "$dir/postgres.log" >&2
      exit 1
    fi
    echo "postgresql://postgres@127.0.0.1:$port/postgres" | tee "$dir/uri"
    ;;
  stop)
    pg_ctl_in -w -t 60 -m "${3:-fast}" stop >/dev/null
    ;;
  destroy)
    if [ -f "$dir/data/postmaster.pid" ]; then
      pg_ctl_in -w -t 60 -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "temp_postgres: unknown command \"$cmd\"" >&2
    exit 2
    ;;
esac
