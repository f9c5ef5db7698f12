#!/bin/sh
# Generates hilo.v1 client stubs for other languages from
# proto/hilo/v1/hilo.proto, into a build directory (never into the repo).
#
#   scripts/gen-stubs.sh [OUT_DIR [LANGUAGE...]]
#
# OUT_DIR defaults to build/gen (ignored by git). LANGUAGE is any of
# python go java node ruby php csharp; all of them by default. Output:
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
LANGS=${*:-"python go java node ruby php csharp"}

PROTO_DIR="$ROOT/proto"
PROTO="hilo/v1/hilo.proto"
NODE_BIN="$ROOT/tools/node_modules/.bin"

need() {
  if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "$1" ]; then
    echo "gen-stubs: $1 not found; run scripts/install-deps-languages.sh" >&2
    exit 1
  fi
}

need protoc
mkdir -p "$OUT"
OUT=$(CDPATH= cd -- "$OUT" && pwd)

for lang in $LANGS; do
  dir="$OUT/$lang"
  rm -rf "$dir"
  mkdir -p "$dir"
  case "$lang" in
    python)
      need grpc_python_plugin
      protoc -I "$PROTO_DIR" --python_out="$dir" --pyi_out="$dir" \
        --grpc_python_out="$dir" \
        --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
        "$PROTO"
      ;;
    go)
      need protoc-gen-go
      need protoc-gen-go-grpc
      mkdir -p "$dir/src"
      protoc -I "$PROTO_DIR" --go_out="$dir/src" --go-grpc_out="$dir/src" \
        "$PROTO"
      ;;
    java)
      need grpc_java_plugin
      protoc -I "$PROTO_DIR" --java_out="$dir" --grpc-java_out="$dir" \
        --plugin=protoc-gen-grpc-java="$(command -v grpc_java_plugin)" \
        "$PROTO"
      ;;
    node)
      need "$NODE_BIN/protoc-gen-ts_proto"
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
      need grpc_ruby_plugin
      protoc -I "$PROTO_DIR" --ruby_out="$dir" --grpc_ruby_out="$dir" \
        --plugin=protoc-gen-grpc_ruby="$(command -v grpc_ruby_plugin)" \
        "$PROTO"
      ;;
    php)
      need grpc_php_plugin
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
      echo "gen-stubs: unknown language '$lang'" >&2
      exit 2
      ;;
  esac
  echo "gen-stubs: $lang -> $dir"
done
