// The interval summary of CONTRACT.md R11 (src/held.ts): exact intervals
// after adds and removals, the merge of the closest pair, and a range
// refused exactly when it overlaps, at each edge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { PKG } from './helpers.mjs';

const { HeldNumbers, MAX_HELD_TAGS, addInterval, removeInterval } = await import(join(PKG, 'dist/esm/held.js'));
const TOP = 2n ** 63n - 1n;

/** [[low, high], ...] from numbers. */
const spans = (...b) => {
  const out = [];
  for (let i = 0; i < b.length; i += 2) out.push([BigInt(b[i]), BigInt(b[i + 1])]);
  return out;
};

test('touching ranges become one interval', () => {
  assert.deepEqual(addInterval(addInterval([], 1n, 32n), 33n, 96n), spans(1, 96));
});

test('four intervals are kept apart', () => {
  let s = [];
  for (const low of [1n, 101n, 1001n]) s = addInterval(s, low, low + 9n);
  s = addInterval(s, TOP, TOP);
  assert.deepEqual(s, [...spans(1, 10, 101, 110, 1001, 1010), [TOP, TOP]]);
});

test('a fifth merges the two with the smallest gap', () => {
  const four = [...spans(1, 10, 101, 110, 1001, 1010), [TOP, TOP]];
  // 120-130: gap 10 after 101-110, the smallest.
  assert.deepEqual(addInterval(four, 120n, 130n), [...spans(1, 10, 101, 130, 1001, 1010), [TOP, TOP]]);
  // 50-60: gaps 40 (from 10) and 41 (to 101): joins 1-10.
  assert.deepEqual(addInterval(four, 50n, 60n), [...spans(1, 60, 101, 110, 1001, 1010), [TOP, TOP]]);
  assert.deepEqual(four, [...spans(1, 10, 101, 110, 1001, 1010), [TOP, TOP]]);
});

test('a tie merges the lowest pair', () => {
  assert.deepEqual(addInterval(spans(1, 1, 11, 11, 21, 21, 31, 31), 41n, 41n), spans(1, 11, 21, 21, 31, 31, 41, 41));
});

test('the two highest are never merged', () => {
  assert.deepEqual(
    addInterval(spans(1, 10, 1001, 1010, 2001, 2010, 3001, 3010), 3020n, 3030n),
    spans(1, 1010, 2001, 2010, 3001, 3010, 3020, 3030),
  );
});

// faults.stress_short's case: had 301-310 and 321-400 (the current range)
// become one, handing 321-400 back would leave 301-320, and the node's next
// range, 311 on, refused.
test('a gap at the top is never covered', () => {
  const held = new HeldNumbers();
  for (const [low, high] of spans(1, 10, 101, 110, 201, 210, 301, 310, 321, 400)) held.add('A', low, high);
  held.remove('A', 321n, 400n);
  assert.deepEqual(held.intervals('A'), spans(1, 110, 201, 210, 301, 310));
  assert.equal(held.problemWith('A', 311n, 374n), null);
});

test('remove takes a tail, a whole or a middle', () => {
  assert.deepEqual(removeInterval(spans(1, 96), 41n, 96n), spans(1, 40));
  assert.deepEqual(removeInterval(spans(1, 96), 33n, 96n), spans(1, 32));
  assert.deepEqual(removeInterval(spans(1, 96), 1n, 96n), []);
  assert.deepEqual(removeInterval(spans(1, 96), 40n, 50n), spans(1, 39, 51, 96));
  assert.deepEqual(removeInterval([[5n, TOP]], 6n, TOP), spans(5, 5));
});

test('a split past four merges again', () => {
  // 1-100 less 50-99 is 1-49 and 100-100: five, and the smallest gap is
  // 49 to 100 (51; 100 to 201 is 101), so they join again.
  assert.deepEqual(
    removeInterval(spans(1, 100, 201, 210, 301, 310, 1001, 1010), 50n, 99n),
    spans(1, 100, 201, 210, 301, 310, 1001, 1010),
  );
});

test('refused exactly when overlapping, at each edge', () => {
  const held = new HeldNumbers();
  held.add('A', 33n, 96n);
  held.add('A', TOP, TOP);
  for (const [low, high] of [...spans(96, 200, 1, 33, 40, 50, 1, 200), [TOP - 5n, TOP]]) {
    assert.notEqual(held.problemWith('A', low, high), null, `${low}-${high}`);
  }
  assert.equal(held.problemWith('A', 1n, 32n), null); // below
  assert.equal(held.problemWith('A', 97n, 128n), null); // between
  assert.equal(held.problemWith('B', 33n, 96n), null); // another node
  assert.deepEqual(held.intervals('A'), [[33n, 96n], [TOP, TOP]]);
});

test('tags are bounded and never forgotten', () => {
  assert.equal(MAX_HELD_TAGS, 256);
  const held = new HeldNumbers();
  for (let i = 0; i < MAX_HELD_TAGS; i++) {
    assert.equal(held.problemWith(`T${i}`, 1n, 1n), null);
    held.add(`T${i}`, 1n, 1n);
    held.remove(`T${i}`, 1n, 1n);
  }
  assert.notEqual(held.problemWith('NEW', 1n, 1n), null);
  assert.equal(held.problemWith('T0', 1n, 1n), null); // known, now empty
  assert.deepEqual(held.intervals('T0'), []);
});
