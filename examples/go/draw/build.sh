#!/bin/sh
# Builds the Go draw example offline (GOPATH mode, Debian's Go packages) as
# OUT_DIR/draw; run it as
#
#   OUT_DIR/draw --targets=HOST:PORT[,...] --collection=NAME --threads=N --seconds=S
#
#   examples/go/draw/build.sh GEN_DIR OUT_DIR
#
# GEN_DIR is what scripts/gen-stubs.sh writes (it needs GEN_DIR/go).
#
# It builds only when OUT_DIR/draw is missing or was built from other
# sources (this example, the client, the stubs): their checksums are kept in
# OUT_DIR/draw.sums (checksums, not times, because the lang.gen_stubs test
# rewrites the stubs, unchanged, on every run). Several callers at once
# (scripts/hilo-draw go, started twice by conformance.draw_together) take
# turns on OUT_DIR/.lock, waiting at most 300 s, and the program is renamed
# into place whole, so a caller never runs a half-written one.
set -eu
ROOT=$(CDPATH='' cd -- "$(dirname -- "$0")/../../.." && pwd)
# shellcheck source=scripts/build_lib.sh
. "$ROOT/scripts/build_lib.sh"
hilo_args 2 "GEN_DIR OUT_DIR" "$@"
if [ ! -d "$1/go" ]; then
  echo "$0: no Go stubs in $1/go; run scripts/gen-stubs.sh (or the lang.gen_stubs test) first" >&2
  exit 1
fi
mkdir -p "$2"
hilo_take_turns "$2/.lock" "$0"
sums=$(find "$ROOT/examples/go/draw" "$ROOT/clients/go" "$1/go" -name '*.go' \
         ! -name '*_test.go' -type f -print0 | sort -z | xargs -0 sha256sum)
if [ -x "$2/draw" ] && hilo_up_to_date "$2/draw.sums" "$sums"; then
  exit 0
fi
rm -f "$2/draw.sums"
# shellcheck source=clients/go/goenv.sh
. "$ROOT/clients/go/goenv.sh"
hilo_go_env "$ROOT" "$1" "$2"
go vet "$ROOT/examples/go/draw/main.go"
go build -o "$2/draw.new" "$ROOT/examples/go/draw/main.go"
mv -f "$2/draw.new" "$2/draw"
printf '%s\n' "$sums" >"$2/draw.sums"
