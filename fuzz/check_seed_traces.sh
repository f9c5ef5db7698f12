#!/bin/sh
# Replays every seed of the corpus with the tracing replay binary and
# compares each operation trace with the expected one checked in beside it:
#
#   fuzz/check_seed_traces.sh REPLAY_BINARY CORPUS_DIR TRACES_DIR
#
# A seed pins a bug only while it replays the operations it was saved for;
# a change to how the fuzzer decodes its input (the operation pick, what an
# operation consumes) silently turns it into another input. Fails naming
# each seed whose trace differs (with the diff), that has no trace, or whose
# replay broke an invariant, and each trace without its seed.
set -u
replay=$1
corpus=$2
traces=$3
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for seed in "$corpus"/*; do
  name=$(basename "$seed")
  want=$traces/$name.trace
  if [ ! -f "$want" ]; then
    echo "check_seed_traces: seed $name has no expected trace $want"
    failed=1
    continue
  fi
  if ! "$replay" "$seed" >"$out"; then
    echo "check_seed_traces: seed $name: the replay failed (see above)"
    failed=1
    continue
  fi
  if ! diff -u "$want" "$out" >"$out.diff"; then
    echo "check_seed_traces: seed $name no longer replays its trace" \
      "(expected ---, now +++):"
    cat "$out.diff"
    failed=1
  fi
  rm -f "$out.diff"
done
for want in "$traces"/*.trace; do
  name=$(basename "$want" .trace)
  if [ ! -f "$corpus/$name" ]; then
    echo "check_seed_traces: trace $name.trace has no seed in $corpus"
    failed=1
  fi
done
if [ "$failed" -eq 0 ]; then
  echo "check_seed_traces: every seed replays its trace"
fi
exit "$failed"
