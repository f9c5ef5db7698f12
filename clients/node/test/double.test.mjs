// HiloClient against an in-process double of hilo_server that keeps the
// server's rules (helpers.mjs) and breaks them only where a test says so:
// replies that break the contract, held replies, returns, outages.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { grpc, HiloClient, HiloError, StatusCode, startDouble, rejectsWith, settle, until, within } from './helpers.mjs';

const doubles = [];
async function double(opts) {
  const d = await startDouble(opts);
  doubles.push(d);
  return d;
}
after(async () => {
  for (const d of doubles) d.kill();
});

const INT64_MAX = 2n ** 63n - 1n;

for (const [name, reply] of [
  ['a node tag that is not 1-4 of A-Z0-9', (r) => ({ ...r, node_tag: 'ab!' })],
  ['an empty node tag', (r) => ({ ...r, node_tag: '' })],
  ['a five-character node tag', (r) => ({ ...r, node_tag: 'ABCDE' })],
  ['a range starting at 0', (r) => ({ ...r, low: '0' })],
  ['a range whose high is below its low', (r) => ({ ...r, high: String(BigInt(r.low) - 1n) })],
  ['a range_at past 9999-12-31', (r) => ({ ...r, range_at: { seconds: '253402300800', nanos: 0 } })],
  ['a range of 2^63 - 1 numbers', (r) => ({ ...r, low: '1', high: '9223372036854775807' })],
]) {
  test(`${name} is refused: INTERNAL from one target, the next target's range with two`, async () => {
    const bad = await double({ tag: 'A' });
    const good = await double({ tag: 'B' });
    bad.nextRangeHook = (req, rules) => reply(rules.issue(req));
    const alone = new HiloClient({ targets: [bad.target] });
    const e = await rejectsWith(alone.nextId('c'), 'INTERNAL');
    assert.match(e.message, new RegExp(bad.target));
    await alone.close();
    const both = new HiloClient({ targets: [bad.target, good.target], prefetchAt: 0 });
    assert.equal(await both.nextDocumentId('c'), 'c/1-B');
    assert.equal(both.stats().failovers, 1);
    await both.close();
  });
}

test('a range that does not lie above the last one from that node is refused', async () => {
  const d = await double();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  for (let i = 1; i <= 32; i++) assert.equal(await a.nextDocumentId('c'), `c/${i}-A`);
  // The node answers 20-51: overlapping numbers already handed out.
  d.nextRangeHook = (req, rules) => ({ ...rules.issue(req), low: '20', high: '51' });
  const e = await rejectsWith(a.nextId('c'), 'INTERNAL');
  assert.match(e.message, /does not lie above/);
  d.nextRangeHook = null;
  assert.equal(await a.nextDocumentId('c'), 'c/65-A'); // 33-64 went to the refused reply
  await a.close();
});

test('each NextRange reports the previous range: last_size, last_range_at, last_max', async () => {
  const d = await double();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  for (let i = 0; i < 33; i++) await a.nextId('c');
  assert.equal(d.requests.length, 2);
  assert.equal(d.requests[0].last_size, '0');
  assert.equal(d.requests[0].last_max, '0');
  assert.equal(d.requests[1].last_size, '32');
  assert.equal(d.requests[1].last_max, '32');
  assert.notEqual(d.requests[1].last_range_at, null);
  assert.ok(Number(d.requests[1].last_range_at.seconds) > 0);
  await a.close();
});

test('numbers up to INT64_MAX are exact, and OUT_OF_RANGE passes through', async () => {
  const d = await double();
  d.nextRangeHook = (req, rules) =>
    BigInt(req.last_max) >= INT64_MAX
      ? Object.assign(new Error('past INT64_MAX'), { code: grpc.status.OUT_OF_RANGE, details: 'past INT64_MAX' })
      : rules.issue({ ...req, last_max: String(INT64_MAX - 32n) });
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  const ids = [];
  for (let i = 0; i < 32; i++) ids.push(await a.nextDocumentId('c'));
  assert.equal(ids[0], `c/${INT64_MAX - 31n}-A`);
  assert.equal(ids[31], `c/${INT64_MAX}-A`);
  await rejectsWith(a.nextId('c'), 'OUT_OF_RANGE');
  await a.close();
});

test('single flight: 100 callers on a dry collection, one NextRange; the re-check takes numbers', async () => {
  const d = await double({ size: 150 });
  const release = d.hold();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  const calls = Array.from({ length: 100 }, () => a.nextId('c'));
  await until(() => d.requests.length === 1, 5000, 'the NextRange');
  await settle();
  assert.equal(d.requests.length, 1);
  release();
  const ids = await within(Promise.all(calls), 5000, 'callers');
  assert.equal(new Set(ids.map((i) => i.number)).size, 100);
  assert.equal(d.requests.length, 1);
  assert.equal(a.stats().calls_waited, 100);
  await a.close();
});

test('a failed refill reaches every waiter once, is cleared, and the next caller asks again', async () => {
  const d = await double();
  let fail = true;
  d.nextRangeHook = () =>
    fail ? Object.assign(new Error('scripted'), { code: grpc.status.UNAVAILABLE, details: 'scripted outage' }) : undefined;
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  const results = await within(Promise.allSettled(Array.from({ length: 10 }, () => a.nextId('c'))), 5000, 'callers');
  assert.ok(results.every((r) => r.status === 'rejected' && r.reason.codeName === 'UNAVAILABLE'));
  assert.equal(d.requests.length, 1); // the waiters did not retry
  assert.equal(a.stats().errors.UNAVAILABLE, 1);
  fail = false;
  assert.deepEqual(await a.nextId('c'), { number: 1n, tag: 'A' });
  assert.equal(d.requests.length, 2);
  await a.close();
});

test('an aborted caller stops waiting with CANCELLED; the fetch goes on for the others', async () => {
  const d = await double();
  const release = d.hold();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  const ctl = new AbortController();
  const gone = a.nextId('c', { signal: ctl.signal });
  const stays = a.nextId('c');
  await until(() => d.requests.length === 1, 5000, 'the NextRange');
  ctl.abort(new Error('caller gave up'));
  const e = await rejectsWith(gone, 'CANCELLED');
  assert.match(e.message, /caller gave up/);
  release();
  assert.deepEqual(await within(stays, 5000, 'the other caller'), { number: 1n, tag: 'A' });
  await rejectsWith(a.nextId('c', { signal: AbortSignal.abort() }), 'CANCELLED');
  await a.close();
});

test('close: the range fetched ahead and the tail go back as one adjacent pair, later first, with their tokens', async () => {
  const d = await double();
  const a = new HiloClient({ targets: [d.target] });
  const issued = [];
  d.nextRangeHook = (req, rules) => {
    const r = rules.issue(req);
    issued.push(r);
    return r;
  };
  for (let i = 0; i < 10; i++) await a.nextId('c');
  await until(() => a.stats().ranges_prefetched === 1, 5000, 'prefetch');
  await a.close();
  assert.equal(d.returnCalls.length, 1);
  const [whole, tail] = d.returnCalls[0].items;
  assert.deepEqual(
    { end: whole.end, last: whole.last, token: whole.range_token, tag: whole.node_tag },
    { end: '64', last: '32', token: issued[1].range_token, tag: 'A' },
  );
  assert.deepEqual(
    { end: tail.end, last: tail.last, token: tail.range_token, tag: tail.node_tag },
    { end: '32', last: '10', token: issued[0].range_token, tag: 'A' },
  );
  assert.equal(d.max('c'), 10n);
  assert.equal(a.stats().returns_applied, 2);
});

test('stats: runway_ms is what a collection holds at the rate it handed numbers out lately', async () => {
  const d = await double();
  let now = 1000;
  const a = new HiloClient({ targets: [d.target], clock: () => now });
  const issued = [];
  d.nextRangeHook = (req, rules) => {
    const r = rules.issue(req);
    issued.push(r);
    return r;
  };
  const near = (want, what) => {
    const got = a.stats().runway_ms.r;
    assert.ok(got !== undefined && Math.abs(got - want) < 1e-6, `${what}: runway ${got} ms, want ${want}`);
  };
  assert.equal(a.stats().runway_ms.r, undefined); // nothing held
  await a.nextId('r');
  assert.equal(a.stats().runway_ms.r, undefined); // no time passed
  now += 1000;
  near(31000, '31 held at 1 a second');
  for (let i = 2; i <= 10; i++) await a.nextId('r'); // the 7th asks for the next range
  await until(() => a.stats().ranges_prefetched === 1, 5000, 'prefetch');
  const ahead = Number(BigInt(issued[1].high) - BigInt(issued[1].low) + 1n);
  near(((22 + ahead) / 10) * 1000, '22 and the range ahead at 10 a second');
  now += 1000;
  for (let i = 11; i <= 33; i++) await a.nextId('r');
  // The range ahead took over; the window began with 1-32: 33 numbers in 2 s.
  near(((ahead - 1) * 2000) / 33, 'the range ahead in use');
  now += 2000;
  near(((ahead - 1) * 4000) / 33, 'no number for 2 s');
  await a.close();
  assert.equal(a.stats().runway_ms.r, undefined); // handed back
});

test('close falls back to one ReturnRange per item, same order, on UNIMPLEMENTED', async () => {
  const d = await double();
  d.returnsMode = 'unimplemented';
  const a = new HiloClient({ targets: [d.target] });
  for (let i = 0; i < 10; i++) await a.nextId('c');
  await until(() => a.stats().ranges_prefetched === 1, 5000, 'prefetch');
  await a.close();
  assert.deepEqual(
    d.returnCalls.map((c) => [c.single, c.items.map((i) => `${i.end}:${i.last}`)]),
    [[false, ['64:32', '32:10']], [true, ['64:32']], [true, ['32:10']]],
  );
  assert.equal(d.max('c'), 10n);
  assert.equal(a.stats().returns_applied, 2);
});

test('a return is retried after UNAVAILABLE, to the node that issued it', async () => {
  const d = await double();
  d.failReturns = 1;
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  await a.nextId('c');
  await a.close();
  assert.equal(d.returnCalls.length, 2);
  assert.equal(d.max('c'), 1n);
  assert.deepEqual([a.stats().returns_applied, a.stats().returns_failed], [1, 0]);
});

test('a return that keeps failing is logged and counted, within the deadline', async () => {
  const d = await double();
  d.failReturns = 100;
  const lines = [];
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0, rpcDeadlineMs: 500, log: (l) => lines.push(l) });
  await a.nextId('c');
  await within(a.close(), 3000, 'close');
  assert.equal(d.returnCalls.length, 3);
  assert.equal(a.stats().returns_failed, 1);
  assert.equal(a.stats().errors.UNAVAILABLE, 1);
  assert.match(lines.join('\n'), /returning numbers 2-32 of collection "c".*UNAVAILABLE/);
});

test('close waits for its returns and no number is handed out after them', async () => {
  const d = await double();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  await a.nextId('c');
  const release = d.hold();
  let closed = false;
  const closing = a.close().then(() => (closed = true));
  await until(() => d.returnCalls.length === 1, 5000, 'the return');
  await settle();
  assert.equal(closed, false);
  await rejectsWith(a.nextId('c'), 'FAILED_PRECONDITION');
  release();
  await within(closing, 5000, 'close');
  assert.equal(d.max('c'), 1n);
});

test('ranges from two nodes: each number carries its own range\'s tag, each range goes back to its node', async () => {
  const da = await double({ tag: 'A' });
  const db = await double({ tag: 'B' });
  const a = new HiloClient({ targets: [da.target, db.target] });
  for (let i = 1; i <= 6; i++) assert.equal(await a.nextDocumentId('c'), `c/${i}-A`);
  da.kill(); // the prefetch (at the 7th number) goes to B
  assert.equal(await a.nextDocumentId('c'), 'c/7-A');
  await until(() => a.stats().ranges_prefetched === 1, 5000, 'prefetch from B');
  const rest = [];
  for (let i = 8; i <= 34; i++) rest.push(await a.nextDocumentId('c'));
  assert.equal(rest[24], 'c/32-A');
  assert.equal(rest[25], 'c/33-B');
  assert.equal(rest[26], 'c/34-B');
  await a.close();
  assert.deepEqual(db.returnCalls.map((c) => c.items.map((i) => `${i.node_tag}:${i.end}:${i.last}`)), [['B:64:34']]);
});

test('waiters that keep losing the race stop with DEADLINE_EXCEEDED; they never refetch forever', async () => {
  const d = await double({ size: 1 });
  let now = 0;
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0, rpcDeadlineMs: 1000, clock: () => now });
  const release = d.hold();
  const calls = [a.nextId('c'), a.nextId('c'), a.nextId('c')];
  await until(() => d.requests.length === 1, 5000, 'the NextRange');
  now = 2001; // past rpcDeadlineMs x (targets + 1) since the callers started waiting
  release();
  const results = await within(Promise.allSettled(calls), 5000, 'callers');
  assert.deepEqual(results[0], { status: 'fulfilled', value: { number: 1n, tag: 'A' } });
  for (const r of results.slice(1)) {
    assert.equal(r.status, 'rejected');
    assert.equal(r.reason.codeName, 'DEADLINE_EXCEEDED');
    assert.match(r.reason.message, /waited over 2000 ms for a number of "c"/);
  }
  assert.equal(d.requests.length, 1);
});

test('close sends a node more than 1000 returns in several ReturnRanges calls, every one applied', async () => {
  const d = await double();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  for (let i = 0; i < 1001; i++) await a.nextId(`c${i}`);
  await a.close();
  const sizes = d.returnCalls.map((c) => c.items.length);
  assert.equal(sizes.length, 2, String(sizes)); // 1000 items or 60 KiB per call, whichever comes first
  assert.ok(sizes.every((n) => n <= 1000), String(sizes));
  assert.equal(sizes[0] + sizes[1], 1001);
  assert.equal(a.stats().returns_applied, 1001);
  assert.equal(d.max('c1000'), 1n);
});

// examples/node/draw.ts (scripts/hilo-draw node), issue 26 section 3: only
// UNAVAILABLE is waited out while drawing; a return that fails at close for
// a reason other than its node being down makes the exit status 1.
const DRAW = process.env.HILO_NODE_OUT && join(process.env.HILO_NODE_OUT, 'examples', 'draw.js');

/** Runs draw.js to its end without blocking this process's event loop (the double answers from it). */
function runDraw(args) {
  const proc = spawn('node', [DRAW, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (c) => (stdout += c));
  proc.stderr.on('data', (c) => (stderr += c));
  const done = new Promise((r) => proc.once('close', (status) => r({ status, stdout, stderr })));
  return within(done, 30000, 'draw.js').finally(() => proc.kill('SIGKILL'));
}

test('draw.js: only UNAVAILABLE is waited out; DEADLINE_EXCEEDED and every other code end the draw', async () => {
  const { waitedOut, closeFailures } = await import(DRAW);
  const e = (code) => new HiloError(StatusCode[code], 'x');
  assert.equal(waitedOut(e('UNAVAILABLE')), true);
  for (const code of ['DEADLINE_EXCEEDED', 'INTERNAL', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION', 'OUT_OF_RANGE']) {
    assert.equal(waitedOut(e(code)), false, code);
  }
  assert.equal(waitedOut(new Error('not a HiloError')), false);
  // Close: a node down (UNAVAILABLE, DEADLINE_EXCEEDED) is no failure of the draw; anything else is.
  assert.equal(closeFailures({ INTERNAL: 1 }, { INTERNAL: 1, UNAVAILABLE: 2, DEADLINE_EXCEEDED: 1 }), null);
  assert.match(
    closeFailures({ UNAVAILABLE: 1 }, { UNAVAILABLE: 3, PERMISSION_DENIED: 2, INTERNAL: 1 }),
    /other than a node being down: 1 INTERNAL, 2 PERMISSION_DENIED$/,
  );
});

test('draw.js: replies that break the contract end the draw with INTERNAL on stderr, exit 1', async () => {
  const d = await double({ tag: 'A' });
  d.nextRangeHook = (req, rules) => ({ ...rules.issue(req), node_tag: 'ab!' });
  const r = await runDraw([`--targets=${d.target}`, '--collection=c', '--threads=2', '--seconds=2']);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /^draw: INTERNAL: no hilo server gave a usable range of "c": .*ab!/m);
});

test('draw.js: a return refused with PERMISSION_DENIED at close is named on stderr, exit 1; UNAVAILABLE is not', async () => {
  const d = await double({ tag: 'A' });
  d.returnsError = { code: grpc.status.PERMISSION_DENIED, details: 'no returns for you' };
  const denied = await runDraw([`--targets=${d.target}`, '--collection=c', '--threads=2', '--seconds=0.2']);
  assert.equal(denied.status, 1, denied.stderr);
  assert.ok(denied.stdout.split('\n').filter((l) => l !== '').length > 0, 'no IDs printed');
  assert.match(denied.stderr, /^draw: handing unused numbers back failed for a reason other than a node being down: [1-9][0-9]* PERMISSION_DENIED$/m);
  d.returnsError = { code: grpc.status.UNAVAILABLE, details: 'node going down' };
  const down = await runDraw([`--targets=${d.target}`, '--collection=c', '--threads=2', '--seconds=0.2']);
  assert.equal(down.status, 0, down.stderr);
  assert.match(down.stderr, /UNAVAILABLE/); // the client logged the failed return
});

// CONTRACT.md R18, asserted on what the channels are made with (the
// conformance scenario reconnects_soon_after_long_outage measures recovery).
test('channels cap the reconnect back-off at one second unless channelOptions say otherwise', async () => {
  const options = (c) => c.transport.stubs[0].getChannel().internalChannel.options;
  const plain = new HiloClient({ targets: ['127.0.0.1:1'] });
  assert.equal(options(plain)['grpc.max_reconnect_backoff_ms'], 1000);
  assert.equal(options(plain)['grpc.initial_reconnect_backoff_ms'], 100);
  await plain.close();
  const own = new HiloClient({ targets: ['127.0.0.1:1'], channelOptions: { 'grpc.max_reconnect_backoff_ms': 5000 } });
  assert.equal(options(own)['grpc.max_reconnect_backoff_ms'], 5000);
  await own.close();
});
