#!/bin/sh
# Builds the Go draw example offline (GOPATH mode, Debian's Go packages) as
# OUT_DIR/draw; run it as
#
#   OUT_DIR/draw --targets=HOST:PORT[,...] --collection=NAME --threads=N --seconds=S
#
#   examples/go/draw/build.sh GEN_DIR OUT_DIR
#
# GEN_DIR is what scripts/gen-stubs.sh writes (it needs GEN_DIR/go).
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 GEN_DIR OUT_DIR" >&2
  exit 2
fi
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../../.." && pwd)
mkdir -p "$2"
. "$ROOT/clients/go/goenv.sh"
hilo_go_env "$ROOT" "$1" "$2"
go vet "$ROOT/examples/go/draw/main.go"
go build -o "$2/draw" "$ROOT/examples/go/draw/main.go"
