#!/bin/sh
# Makes the hilo Go client usable from your own Go module (module mode):
#
#   clients/go/add-to-module.sh [--debian] MODULE_DIR
#
# MODULE_DIR holds your go.mod (`go mod init` made it). The script
#   - generates the hilo.v1 stubs into MODULE_DIR/.hilo/gen (a module of its
#     own, github.com/hilo-id/hilo/gen/go: generated code is never committed,
#     so no proxy serves it), and
#   - adds to your go.mod a `require` of github.com/hilo-id/hilo/clients/go
#     and two `replace` lines: the client to this checkout's clients/go, the
#     stubs to .hilo/gen (paths relative to MODULE_DIR).
# Then `import hilo "github.com/hilo-id/hilo/clients/go"` builds; gRPC and
# protobuf come from your module proxy as usual (`go mod tidy`).
#
# --debian: offline, on Debian 12, without a module proxy. Every other module
# of the build is replaced too: by Debian's source in /usr/share/gocode
# (golang-google-grpc-dev and the packages scripts/install-deps-languages.sh
# go installs), or, for a module that gRPC's go.mod names but Debian does
# not package and the build never imports (envoy's, glog, ...), by an empty
# module under .hilo/empty. Then `go build` needs no network.
#
# Run it again after the proto or the checkout moves. Add .hilo/ to your
# .gitignore.
set -eu
usage() { echo "usage: $0 [--debian] MODULE_DIR" >&2; exit 2; }
debian=0
if [ "${1:-}" = --debian ]; then debian=1; shift; fi
[ $# -eq 1 ] || usage
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd -L)
MOD=$(CDPATH= cd -- "$1" && pwd -L)
[ -f "$MOD/go.mod" ] || { echo "add-to-module: no go.mod in $1; run 'go mod init' there first" >&2; exit 1; }
command -v go >/dev/null 2>&1 || { echo "add-to-module: go not found (on Debian: scripts/install-deps-languages.sh go)" >&2; exit 1; }

# A path as go.mod's replace wants it: relative to MODULE_DIR, from ./ or ../
relative() {
  r=$(realpath -s --relative-to="$MOD" "$1")
  case "$r" in ../*) echo "$r" ;; *) echo "./$r" ;; esac
}

gen=$MOD/.hilo/gen
rm -rf "$MOD/.hilo"
"$ROOT/scripts/gen-stubs.sh" "$gen" go >/dev/null
stubs=$gen/go/src/github.com/hilo-id/hilo/gen/go
printf 'module github.com/hilo-id/hilo/gen/go\n\ngo 1.19\n' >"$stubs/go.mod"

cd "$MOD"
go mod edit -require=github.com/hilo-id/hilo/clients/go@v0.0.0 \
  -replace="github.com/hilo-id/hilo/clients/go=$(relative "$ROOT/clients/go")" \
  -replace="github.com/hilo-id/hilo/gen/go=$(relative "$stubs")"

if [ "$debian" -eq 1 ]; then
  # Each round gives every module named so far that nothing provides
  # Debian's source or an empty module, until the client's packages load.
  export GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off
  provide() {
    grep -q "^replace $1 => " go.mod && return 0
    if [ -f "/usr/share/gocode/src/$1/go.mod" ]; then
      go mod edit -replace="$1=/usr/share/gocode/src/$1"
    else
      mkdir -p ".hilo/empty/$1"
      printf 'module %s\n' "$1" >".hilo/empty/$1/go.mod"
      go mod edit -replace="$1=./.hilo/empty/$1"
    fi
  }
  rounds=0
  while ! out=$(go build -o /dev/null github.com/hilo-id/hilo/clients/go 2>&1); do
    rounds=$((rounds + 1))
    named=$( (go mod graph 2>/dev/null | tr ' ' '\n'; printf '%s\n' "$out" |
      sed -n 's/^[[:space:]]*\([^@[:space:]]*@[^:]*\): module lookup disabled.*/\1/p') |
      cut -d@ -f1 | grep -v -e '^github.com/hilo-id/' -e "^$(sed -n 's/^module //p' go.mod)\$" | sort -u)
    # A package no module of the graph provides: the Debian module that
    # holds it (the longest prefix of its path with a go.mod).
    for p in $(printf '%s\n' "$out" |
      sed -n 's/.*cannot find module providing package \([^:]*\):.*/\1/p'); do
      while [ "$p" != . ] && [ ! -f "/usr/share/gocode/src/$p/go.mod" ]; do
        p=$(dirname "$p")
      done
      [ "$p" = . ] || named="$named $p"
    done
    before=$(grep -c '^replace' go.mod || true)
    for m in $named; do provide "$m"; done
    if [ "$(grep -c '^replace' go.mod || true)" = "$before" ] || [ "$rounds" -gt 100 ]; then
      printf 'add-to-module: the client does not load from Debian'"'"'s Go packages:\n%s\n' "$out" >&2
      exit 1
    fi
  done
fi
echo "add-to-module: $(sed -n 's/^module //p' go.mod) requires github.com/hilo-id/hilo/clients/go from $(relative "$ROOT/clients/go")"
