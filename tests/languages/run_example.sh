#!/bin/bash
# Builds one language's example against the generated stubs and runs it
# against a real hilo_server (with_server.sh). The example itself asserts the
# exact ranges, the applied return and INVALID_ARGUMENT, and exits non-zero
# on any difference.
#
#   run_example.sh LANGUAGE SERVER_BIN GEN_DIR WORK_DIR
#
# LANGUAGE: python go java node ruby. GEN_DIR is scripts/gen-stubs.sh's
# output; WORK_DIR holds build products.
set -eu
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
if [ $# -ne 4 ]; then
  echo "usage: $0 LANGUAGE SERVER_BIN GEN_DIR WORK_DIR" >&2
  exit 2
fi
lang=$1 server=$2 gen=$3 work=$4/$1
with_server="$ROOT/testing/with_server.sh"
mkdir -p "$work"

case "$lang" in
  python)
    PYTHONPATH="$gen/python" exec "$with_server" "$server" \
      /usr/bin/python3 "$ROOT/examples/python/hilo_example.py" @TARGET@
    ;;
  go)
    # GOPATH mode: the generated package and Debian's Go libraries
    # (/usr/share/gocode); nothing is downloaded.
    export GO111MODULE=off GOPROXY=off GOFLAGS= \
      GOPATH="$gen/go:/usr/share/gocode"
    [ -n "${HOME:-}" ] || export GOCACHE="$work/gocache"
    go vet "$ROOT/examples/go/main.go"
    go build -o "$work/hilo-example" "$ROOT/examples/go/main.go"
    exec "$with_server" "$server" "$work/hilo-example" @TARGET@
    ;;
  java)
    cp=$("$ROOT/examples/java/classpath.sh")
    rm -rf "$work/classes"
    javac -nowarn -Xlint:none -d "$work/classes" -cp "$cp" \
      "$gen"/java/io/hilo/v1/*.java "$ROOT/examples/java/HiloExample.java"
    exec "$with_server" "$server" java -cp "$work/classes:$cp" HiloExample @TARGET@
    ;;
  node)
    "$ROOT/examples/node/build.sh" "$gen/node" "$work"
    exec "$with_server" "$server" node "$work/js/hilo_example.js" @TARGET@
    ;;
  ruby)
    exec "$with_server" "$server" ruby -w -I "$gen/ruby" \
      "$ROOT/examples/ruby/hilo_example.rb" @TARGET@
    ;;
  *)
    echo "run_example: unknown language '$lang'" >&2
    exit 2
    ;;
esac
