#!/bin/sh
# scripts/gen-stubs.sh on a machine with only protoc and the Python plugin
# (what a Python-only user has): with no language named it generates Python,
# skips every other language with a line naming the missing generator, and
# exits 0; naming a language it cannot generate exits 1 and names the
# generator.
#
#   gen_stubs_partial_test.sh WORK_DIR
set -eu
ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
work=$1/gen_stubs_partial
rm -rf "$work"
mkdir -p "$work/bin"
for tool in protoc grpc_python_plugin sh dirname mkdir rm; do
  ln -s "$(command -v "$tool")" "$work/bin/$tool"
done
fail() { echo "FAIL: $*"; cat "$work/log"; exit 1; }

rc=0
PATH="$work/bin" "$work/bin/sh" "$ROOT/scripts/gen-stubs.sh" "$work/out" \
  >"$work/log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "no language named: exit $rc, want 0"
[ -s "$work/out/python/hilo/v1/hilo_pb2_grpc.py" ] || fail "python not generated"
grep -q "^gen-stubs: go skipped: protoc-gen-go not found" "$work/log" ||
  fail "go's skip does not name protoc-gen-go"
grep -q "^gen-stubs: java skipped: grpc_java_plugin not found" "$work/log" ||
  fail "java's skip does not name grpc_java_plugin"
[ ! -e "$work/out/go" ] || fail "a skipped language left a folder"

rc=0
PATH="$work/bin" "$work/bin/sh" "$ROOT/scripts/gen-stubs.sh" "$work/out" \
  python go >"$work/log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "go named but not generatable: exit $rc, want 1"
grep -q "go FAILED: protoc-gen-go not found" "$work/log" ||
  fail "the failure does not name protoc-gen-go"
[ -s "$work/out/python/hilo/v1/hilo_pb2.py" ] ||
  fail "python, named too, was not generated"
echo "ok: skipped and failed languages named; exit 0 and 1"
rm -rf "$work"
