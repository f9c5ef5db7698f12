#!/bin/sh
# The contract checks, with buf from tools/node_modules:
#   1. buf lint is clean (buf.yaml at the repo root).
#   2. buf breaking: the working tree's proto is compatible with the proto as
#      committed on main (read from the local git repository, offline).
#   3. buf breaking does catch an incompatible change: a copy of the proto
#      with a renumbered field must fail against main.
# Exits 77 (skipped) if there is no git repository or no main branch.
set -eu

ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/../.." && pwd)
BUF="$ROOT/tools/node_modules/.bin/buf"
if [ ! -x "$BUF" ]; then
  echo "buf_check: $BUF missing; run scripts/install-deps-languages.sh" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hilo-buf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export BUF_CACHE_DIR="$tmp/cache"
cd "$ROOT"

echo "buf_check: buf $("$BUF" --version)"
"$BUF" lint
echo "ok   buf lint"

if [ ! -d "$ROOT/.git" ]; then
  echo "buf_check: SKIP breaking: $ROOT has no .git directory"
  exit 77
fi
if git -C "$ROOT" rev-parse --verify -q refs/heads/main >/dev/null; then
  ref=main
  against="$ROOT/.git#branch=main,subdir=proto"
elif git -C "$ROOT" rev-parse --verify -q refs/remotes/origin/main >/dev/null; then
  ref=origin/main
  against="$ROOT/.git#ref=origin/main,subdir=proto"
else
  echo "buf_check: SKIP breaking: no branch main or origin/main"
  exit 77
fi
if ! git -C "$ROOT" cat-file -e "$ref:proto/hilo/v1/hilo.proto" 2>/dev/null; then
  echo "buf_check: SKIP breaking: $ref has no proto/hilo/v1/hilo.proto yet"
  exit 77
fi

# Against the proto on main: the contract allows additions only.
"$BUF" breaking --against "$against"
echo "ok   buf breaking against $against"

# The check must have teeth: renumber NextRangeResponse.low in a copy, to a
# number far above any field's (a number in use would make the copy fail to
# compile, not fail the check).
mkdir -p "$tmp/ws"
cp buf.yaml "$tmp/ws/"
cp -R proto "$tmp/ws/proto"
sed -i 's/int64 low = 1;/int64 low = 1000;/' "$tmp/ws/proto/hilo/v1/hilo.proto"
if ! grep -q 'int64 low = 1000;' "$tmp/ws/proto/hilo/v1/hilo.proto"; then
  echo "FAIL could not make the incompatible copy (field low not found)"
  exit 1
fi
status=0
"$BUF" breaking "$tmp/ws" --against "$against" >"$tmp/out" 2>&1 || status=$?
cat "$tmp/out"
if [ "$status" -eq 0 ]; then
  echo "FAIL buf breaking accepted a renumbered field"
  exit 1
fi
if ! grep -q 'Previously present field "1" with name "low"' "$tmp/out"; then
  echo "FAIL buf breaking failed (exit $status) for another reason"
  exit 1
fi
echo "ok   buf breaking rejects a renumbered field (exit $status)"
echo "buf_check: all checks passed"
