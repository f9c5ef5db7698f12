#!/bin/sh
# Runs scripts/gen-stubs.sh into OUT_DIR (the fixture the example tests use)
# and checks that every language's files are there and that no generated
# file landed in the source tree.
#
#   gen_stubs_test.sh OUT_DIR
set -eu
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
OUT=$1

"$ROOT/scripts/gen-stubs.sh" "$OUT"

missing=0
for f in \
  python/hilo/v1/hilo_pb2.py python/hilo/v1/hilo_pb2.pyi \
  python/hilo/v1/hilo_pb2_grpc.py \
  go/src/github.com/hilo-id/hilo/gen/go/hilo/v1/hilo.pb.go \
  go/src/github.com/hilo-id/hilo/gen/go/hilo/v1/hilo_grpc.pb.go \
  java/io/hilo/v1/HiLoGrpc.java java/io/hilo/v1/NextRangeRequest.java \
  java/io/hilo/v1/ReturnRangeResponse.java \
  node/hilo/v1/hilo.ts node/google/protobuf/timestamp.ts \
  ruby/hilo/v1/hilo_pb.rb ruby/hilo/v1/hilo_services_pb.rb \
  php/Hilo/V1/HiLoClient.php php/Hilo/V1/NextRangeRequest.php \
  php/GPBMetadata/Hilo/V1/Hilo.php \
  csharp/Hilo.cs
do
  if [ -s "$OUT/$f" ]; then
    echo "ok   $f"
  else
    echo "FAIL missing or empty: $OUT/$f"
    missing=1
  fi
done
# The service must be in each language's client stubs.
grep -q "class HiLoStub" "$OUT/python/hilo/v1/hilo_pb2_grpc.py" || missing=1
grep -q "func NewHiLoClient" \
  "$OUT/go/src/github.com/hilo-id/hilo/gen/go/hilo/v1/hilo_grpc.pb.go" || missing=1
grep -q "newBlockingStub" "$OUT/java/io/hilo/v1/HiLoGrpc.java" || missing=1
grep -q "export const HiLoClient" "$OUT/node/hilo/v1/hilo.ts" || missing=1
grep -q "Stub = Service.rpc_stub_class" "$OUT/ruby/hilo/v1/hilo_services_pb.rb" || missing=1
grep -q "class HiLoClient" "$OUT/php/Hilo/V1/HiLoClient.php" || missing=1

# No generated file may land in the source tree (outside OUT_DIR and build
# directories).
OUT_ABS=$(CDPATH= cd -- "$OUT" && pwd)
stray=$(find "$ROOT" \( -path "$OUT_ABS" -o -path "$ROOT/.git" \
    -o -name node_modules -o -path "$ROOT/build" -o -path "$ROOT/build-*" \) \
    -prune -o -type f \( -name 'hilo_pb2*.py' -o -name 'hilo_pb2*.pyi' \
    -o -name 'hilo*.pb.go' -o -name 'HiLoGrpc.java' -o -name 'hilo_pb.rb' \
    -o -name 'hilo_services_pb.rb' -o -name 'HiLoClient.php' \
    -o -name 'Hilo.cs' -o -name 'hilo.ts' \) -print)
if [ -n "$stray" ]; then
  echo "FAIL generated files in the source tree:"
  echo "$stray"
  missing=1
fi
[ "$missing" -eq 0 ] || exit 1
echo "gen_stubs_test: all checks passed"
