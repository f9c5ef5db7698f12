#!/bin/sh
# The Go client's tests, as CTest runs them (lang.go_client): go vet, a
# check that the compiler still inlines what the fast path relies on
# (go build -gcflags=-m), then go test -race against in-process nodes and
# real hilo_server processes (SERVER_BIN), offline in GOPATH mode; also
# builds (and vets) the conformance driver and the draw example, so that
# they keep compiling, and runs the draw example's tests.
#
#   clients/go/run_tests.sh SERVER_BIN GEN_DIR WORK_DIR [CPP_ID_DUMP]
#
# GEN_DIR is what scripts/gen-stubs.sh writes; WORK_DIR holds build products.
# CPP_ID_DUMP (tests/languages/cpp_id_dump) lets a test draw with the C++
# client at the same time, checking that no ID of either comes twice.
set -eu
if [ $# -ne 3 ] && [ $# -ne 4 ]; then
  echo "usage: $0 SERVER_BIN GEN_DIR WORK_DIR [CPP_ID_DUMP]" >&2
  exit 2
fi
absolute() { echo "$(CDPATH= cd -- "$(dirname -- "$1")" && pwd)/$(basename -- "$1")"; }
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
# go test runs in the package's directory: the paths must be absolute.
server=$(absolute "$1")
dump=""
[ $# -eq 4 ] && dump=$(absolute "$4")
mkdir -p "$3"
. "$ROOT/clients/go/goenv.sh"
hilo_go_env "$ROOT" "$2" "$3"
pkg=github.com/hilo-id/hilo/clients/go
go vet "$pkg"
# The fast path rests on the compiler inlining these (see the comments at
# each): Collection.NextID into its caller, so that the call goes straight
# to rangeCache.next (cost 80 of the budget's 80: one token more and it
# becomes a call of its own, without a word from the build);
# Collection.rangeCache into NextDocumentID and AppendDocumentID; and
# span.take, the one atomic add, into rangeCache.next.
inlinable=$(go build -gcflags=-m "$pkg" 2>&1) || { printf '%s\n' "$inlinable" >&2; exit 1; }
for f in '(*Collection).NextID' '(*Collection).rangeCache' '(*span).take'; do
  if ! printf '%s\n' "$inlinable" | awk -v want=": can inline $f" '
      substr($0, length($0) - length(want) + 1) == want { found = 1 }
      END { exit !found }'; then
    why=$(go build -gcflags=-m=2 "$pkg" 2>&1 | grep -F "cannot inline $f:" | head -n 1)
    echo "$0: go build -gcflags=-m no longer says it can inline $f," \
      "which the client's fast path relies on: ${why:-(-m=2 gives no reason)}" >&2
    exit 1
  fi
done
# can inline is not is inlined: span.take must be inlined where the fast
# path calls it.
if ! printf '%s\n' "$inlinable" | grep -q 'inlining call to (\*span).take'; then
  echo "$0: go build -gcflags=-m inlines (*span).take nowhere; rangeCache.next" \
    "relies on it being inlined" >&2
  exit 1
fi
echo "$0: the fast path's functions inline (NextID, rangeCache, span.take)"
"$ROOT/clients/conformance/drivers/go/build.sh" "$2" "$3/driver"
"$ROOT/examples/go/draw/build.sh" "$2" "$3/draw"
go test -count=1 "$ROOT/examples/go/draw/main.go" "$ROOT/examples/go/draw/main_test.go"
HILO_SERVER_BIN=$server HILO_CPP_ID_DUMP=$dump go test -race -count=1 -timeout 240s -v "$pkg"
