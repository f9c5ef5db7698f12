#!/bin/sh
# Builds the Go client's conformance driver offline (GOPATH mode, Debian's
# Go packages) and leaves it as OUT_DIR/driver.
#
#   clients/conformance/drivers/go/build.sh GEN_DIR OUT_DIR
#
# GEN_DIR is what scripts/gen-stubs.sh writes (it needs GEN_DIR/go).
set -eu
ROOT=$(CDPATH='' cd -- "$(dirname -- "$0")/../../../.." && pwd)
# shellcheck source=scripts/build_lib.sh
. "$ROOT/scripts/build_lib.sh"
hilo_args 2 "GEN_DIR OUT_DIR" "$@"
mkdir -p "$2"
. "$ROOT/clients/go/goenv.sh"
hilo_go_env "$ROOT" "$1" "$2"
go vet "$ROOT/clients/conformance/drivers/go/main.go"
go build -o "$2/driver" "$ROOT/clients/conformance/drivers/go/main.go"
