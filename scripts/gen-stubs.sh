#!/bin/sh
# Generates hilo.v1 client stubs for other languages from
# proto/hilo/v1/hilo.proto, into a build directory (never into the repo).
#
#   scripts/gen-stubs.sh [OUT_DIR [LANGUAGE...]]
#
# OUT_DIR defaults to build/gen (ignored by git). LANGUAGE is any of
# python go java node ruby php csharp. With no LANGUAGE, every language whose
# generator is installed is generated and the others are skipped, each with
# one line saying which generator is missing; exit 0. A LANGUAGE named on the
# command line that cannot be generated is an error (exit 1, after the rest).
# Output:
#   OUT_DIR/python/hilo/v1/hilo_pb2.py, hilo_pb2.pyi, hilo_pb2_grpc.py
#   OUT_DIR/go/src/github.com/hilo-id/hilo/gen/go/hilo/v1/*.go  (a GOPATH)
#   OUT_DIR/java/io/hilo/v1/*.java
#   OUT_DIR/node/hilo/v1/hilo.ts (+ google/protobuf/timestamp.ts): TypeScript
#       messages and a @grpc/grpc-js client, made by ts-proto
#   OUT_DIR/ruby/hilo/v1/hilo_pb.rb, hilo_services_pb.rb
#   OUT_DIR/php/Hilo/V1/*.php, OUT_DIR/php/GPBMetadata/...
#   OUT_DIR/csharp/Hilo.cs (messages only; see "Use it from another language" in README.md)
#
# Every generator comes from Debian or from tools/node_modules; run
# scripts/install-deps-languages.sh once first.
set -eu

ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
OUT=${1:-"$ROOT/build/gen"}
[ $# -gt 0 ] && shift
if [ $# -gt 0 ]; then
  LANGS=$* EXPLICIT=1
else
  LANGS="python go java node ruby php csharp" EXPLICIT=0
fi

PROTO_DIR="$ROOT/proto"
PROTO="hilo/v1/hilo.proto"
NODE_BIN="$ROOT/tools/node_modules/.bin"

# need TOOL: whether TOOL (a command or a path) is there; names it if not.
MISSING=
need() {
  if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "$1" ]; then
    MISSING=$1
    return 1
  fi
}

if ! need protoc; then
  echo "gen-stubs: protoc not found; run scripts/install-deps-languages.sh" >&2
  exit 1
fi
mkdir -p "$OUT"
OUT=$(CDPATH= cd -- "$OUT" && pwd)

# generate LANG DIR: writes LANG's stubs into DIR; returns 1 (with MISSING
# set) when a generator it needs is not installed.
generate() {
  lang=$1 dir=$2
  case "$lang" in
    python)
      need grpc_python_plugin || return 1
      protoc -I "$PROTO_DIR" --python_out="$dir" --pyi_out="$dir" \
        --grpc_python_out="$dir" \
        --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
        "$PROTO"
      ;;
    go)
      need protoc-gen-go || return 1
      need protoc-gen-go-grpc || return 1
      mkdir -p "$dir/src"
      protoc -I "$PROTO_DIR" --go_out="$dir/src" --go-grpc_out="$dir/src" \
        "$PROTO"
      ;;
    java)
      need grpc_java_plugin || return 1
      protoc -I "$PROTO_DIR" --java_out="$dir" --grpc-java_out="$dir" \
        --plugin=protoc-gen-grpc-java="$(command -v grpc_java_plugin)" \
        "$PROTO"
      ;;
    node)
      need node || return 1
      need "$NODE_BIN/protoc-gen-ts_proto" || return 1
      # int64 as bigint (numbers reach INT64_MAX); Timestamp kept as
      # {seconds, nanos} so range_at echoes back exactly.
      protoc -I "$PROTO_DIR" \
        --plugin=protoc-gen-ts_proto="$NODE_BIN/protoc-gen-ts_proto" \
        --ts_proto_out="$dir" \
        --ts_proto_opt=outputServices=grpc-js,env=node,esModuleInterop=true \
        --ts_proto_opt=forceLong=bigint,useDate=false \
        "$PROTO"
      ;;
    ruby)
      need grpc_ruby_plugin || return 1
      protoc -I "$PROTO_DIR" --ruby_out="$dir" --grpc_ruby_out="$dir" \
        --plugin=protoc-gen-grpc_ruby="$(command -v grpc_ruby_plugin)" \
        "$PROTO"
      ;;
    php)
      need grpc_php_plugin || return 1
      protoc -I "$PROTO_DIR" --php_out="$dir" --grpc_php_out="$dir" \
        --plugin=protoc-gen-grpc_php="$(command -v grpc_php_plugin)" \
        "$PROTO"
      ;;
    csharp)
      # Messages only: the C# gRPC plugin (grpc_csharp_plugin) ships in the
      # Grpc.Tools NuGet package, which no registry reachable here carries.
      protoc -I "$PROTO_DIR" --csharp_out="$dir" "$PROTO"
      ;;
    *)
      echo "gen-stubs: unknown language '$lang' (python go java node ruby php csharp)" >&2
      exit 2
      ;;
  esac
}

skipped= failed=
for lang in $LANGS; do
  dir="$OUT/$lang"
  rm -rf "$dir"
  mkdir -p "$dir"
  MISSING=
  if generate "$lang" "$dir"; then
    echo "gen-stubs: $lang -> $dir"
    continue
  fi
  rm -rf "$dir"
  if [ -z "$MISSING" ]; then
    echo "gen-stubs: $lang FAILED: protoc could not generate it (above)" >&2
    failed="$failed $lang"
  elif [ "$EXPLICIT" = 1 ]; then
    echo "gen-stubs: $lang FAILED: $MISSING not found; run scripts/install-deps-languages.sh" >&2
    failed="$failed $lang"
  else
    echo "gen-stubs: $lang skipped: $MISSING not found (scripts/install-deps-languages.sh installs it)"
    skipped="$skipped $lang"
  fi
done
[ -z "$skipped" ] || echo "gen-stubs: skipped:$skipped"
if [ -n "$failed" ]; then
  echo "gen-stubs: could not generate:$failed" >&2
  exit 1
fi
