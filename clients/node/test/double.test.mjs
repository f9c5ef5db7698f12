// HiloClient through a hook layer in front of a real hilo_server
// (startDouble, helpers.mjs), for what the conformance suite cannot show:
// held calls, scripted failures of returns, ReturnRanges UNIMPLEMENTED, an
// injected clock, the JS API (AbortSignal, bigint), and the draw program.
// Whatever the real server plus the suite's proxy can show is a conformance
// scenario (clients/conformance/), not a test here.
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
  for (const d of doubles) await d.kill();
});

// The highest last_max a server takes (kMaxFloor, service/store/validation.h):
// its numbers go up to about 2^62, far past 2^53, where a JS number rounds.
const TOP = 2n ** 62n;

test('numbers past 2^53, up to the highest a server issues, are exact', async () => {
  // The first request reports a last_max of 2^62 - 32 (the server's guard
  // on last_max jumps lifted), as if a node had issued up to there. (A
  // server never issues numbers near INT64_MAX: it refuses a last_max or a
  // floor above 2^62, so the double that went up to INT64_MAX showed what
  // no server does.)
  const d = await double({ args: [`--max_last_max_jump=${TOP}`] });
  d.nextRangeHook = (req, rules) =>
    rules.issue(BigInt(req.last_max) === 0n ? { ...req, last_max: String(TOP - 32n) } : req);
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  const ids = [];
  for (let i = 0; i < 33; i++) ids.push(await a.nextDocumentId('c'));
  assert.equal(ids[0], `c/${TOP - 31n}-A`);
  assert.equal(ids[31], `c/${TOP}-A`);
  assert.equal(ids[32], `c/${TOP + 1n}-A`);
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

test('a collection whose first fetch failed is forgotten; its handle moves on to a new cache and draws without waiting', async () => {
  const d = await double();
  let outages = 1;
  d.nextRangeHook = () =>
    outages-- > 0 ? Object.assign(new Error('scripted outage'), { code: grpc.status.UNAVAILABLE }) : undefined;
  const a = new HiloClient({ targets: [d.target], rpcDeadlineMs: 1000 });
  const h = a.collection('orders');
  await rejectsWith(h.nextId(), 'UNAVAILABLE');
  assert.equal(a.caches.size, 0);
  assert.deepEqual(await h.nextId(), { number: 1n, tag: 'A' });
  assert.deepEqual(h.tryNextId(), { number: 2n, tag: 'A' });
  assert.equal(await a.nextDocumentId('orders'), 'orders/3-A');
  assert.equal(a.collection('orders').tryNextDocumentId(), 'orders/4-A');
  assert.deepEqual(a.stats().errors, { UNAVAILABLE: 1 });
  await a.close();
});

// tryNextId and tryNextDocumentId are the handle's calls too (README: a
// handle whose cache was forgotten looks the name up again on its next
// call): the first one after the forgetting, with no await of the handle's
// own in between, finds the collection's new cache and draws from it.
test("a handle's synchronous tryNextId after its cache was forgotten looks the collection up again and draws on", async () => {
  const d = await double();
  let outages = 2;
  d.nextRangeHook = () =>
    outages-- > 0 ? Object.assign(new Error('scripted outage'), { code: grpc.status.UNAVAILABLE }) : undefined;
  const a = new HiloClient({ targets: [d.target], rpcDeadlineMs: 1000 });
  const orders = a.collection('orders');
  const invoices = a.collection('invoices');
  await rejectsWith(orders.nextId(), 'UNAVAILABLE');
  await rejectsWith(invoices.nextDocumentId(), 'UNAVAILABLE');
  assert.equal(a.caches.size, 0); // forgotten: each handle holds a cache the client no longer has
  // Other callers, by name, bring each collection a range (in a new cache).
  assert.equal(await a.nextDocumentId('orders'), 'orders/1-A');
  assert.equal(await a.nextDocumentId('invoices'), 'invoices/1-A');
  assert.deepEqual(orders.tryNextId(), { number: 2n, tag: 'A' });
  assert.equal(invoices.tryNextDocumentId(), 'invoices/2-A');
  assert.deepEqual(orders.tryNextId(), { number: 3n, tag: 'A' });
  assert.equal(a.caches.size, 2);
  assert.deepEqual(a.stats().errors, { UNAVAILABLE: 2 });
  await a.close();
});

test("a handle made before another caller's failed call forgot the collection still works, on the collection's one cache", async () => {
  const d = await double();
  let outages = 2;
  d.nextRangeHook = () =>
    outages-- > 0 ? Object.assign(new Error('scripted outage'), { code: grpc.status.UNAVAILABLE }) : undefined;
  const a = new HiloClient({ targets: [d.target], rpcDeadlineMs: 1000, prefetchAt: 0 });
  const early = a.collection('orders'); // made, never called
  const release = d.hold();
  const failing = a.nextId('orders');
  await until(() => d.requests.length === 1, 5000, 'the NextRange');
  const during = a.collection('orders'); // made while the collection's first fetch is out
  release();
  await rejectsWith(failing, 'UNAVAILABLE');
  await rejectsWith(a.nextDocumentId('orders'), 'UNAVAILABLE'); // once more, both handles made
  assert.equal(a.caches.size, 0);
  assert.deepEqual([...a.handles.keys()], []);
  // Each handle draws from the cache the client keeps now, as callers by name do.
  assert.deepEqual(await early.nextId(), { number: 1n, tag: 'A' });
  assert.equal(await a.nextDocumentId('orders'), 'orders/2-A');
  assert.deepEqual(during.tryNextId(), { number: 3n, tag: 'A' });
  assert.equal(early.tryNextDocumentId(), 'orders/4-A');
  assert.deepEqual(await during.nextId(), { number: 5n, tag: 'A' });
  assert.deepEqual([...a.caches.keys()], ['orders']);
  const stats = a.stats();
  assert.deepEqual([stats.ranges_fetched, stats.calls_waited, stats.errors], [1, 3, { UNAVAILABLE: 2 }]);
  await a.close();
  assert.equal(await d.max('orders'), 5n);
});

// A handle is never registered on a cache: one on a forgotten cache looks
// the name up again on its next call. A kept handle and a new
// collection() handle per call through a long outage must leave nothing
// per handle on the live cache (handles once piled up there, each new
// cache copying every one of them).
test('300 rounds of an outage on a new collection leave no per-handle state on the live cache; every handle works after', async () => {
  const d = await double();
  const ROUNDS = 300;
  let outages = 2 * ROUNDS;
  d.nextRangeHook = () =>
    outages-- > 0 ? Object.assign(new Error('scripted outage'), { code: grpc.status.UNAVAILABLE }) : undefined;
  const a = new HiloClient({ targets: [d.target], rpcDeadlineMs: 1000 });
  const kept = a.collection('orders');
  const handles = [kept];
  for (let i = 0; i < ROUNDS; i++) {
    await rejectsWith(kept.nextId(), 'UNAVAILABLE');
    const h = a.collection('orders');
    handles.push(h);
    await rejectsWith(h.nextDocumentId(), 'UNAVAILABLE');
  }
  assert.equal(a.caches.size, 0);
  assert.deepEqual([...a.handles.keys()], []);
  assert.equal(new Set(handles).size, ROUNDS + 1);
  // Recovered: every handle draws, each through the one live cache.
  const got = [];
  for (const h of handles) got.push((await h.nextId()).number);
  assert.deepEqual(got, Array.from({ length: ROUNDS + 1 }, (_, i) => BigInt(i + 1)));
  const live = a.caches.get('orders');
  assert.equal(a.caches.size, 1);
  for (const h of handles) assert.equal(h.cache, live);
  // Nothing on it grew with the handles: no list of them, and no array,
  // map or set of it holds more than a few entries.
  assert.equal('movers' in live, false);
  for (const [key, v] of Object.entries(live)) {
    const n = Array.isArray(v) ? v.length : v instanceof Map || v instanceof Set ? v.size : 0;
    assert.ok(n < 4, `live cache's ${key} holds ${n} entries`);
  }
  assert.deepEqual(a.stats().errors, { UNAVAILABLE: 2 * ROUNDS });
  assert.equal(handles[ROUNDS].tryNextDocumentId(), `orders/${ROUNDS + 2}-A`);
  await a.close();
});

test('every caller gave up waiting (aborted) and the fetch then failed: the collection is not kept', async () => {
  const d = await double();
  const release = d.hold();
  const a = new HiloClient({ targets: [d.target] });
  const ctl = new AbortController();
  const gone = a.nextId('bad\u0001', { signal: ctl.signal });
  await until(() => d.requests.length === 1, 5000, 'the NextRange');
  ctl.abort(new Error('caller gave up'));
  await rejectsWith(gone, 'CANCELLED');
  assert.equal(a.caches.size, 1); // its fetch is still out
  release();
  await until(() => a.caches.size === 0, 5000, 'the collection dropped');
  assert.deepEqual(a.stats().errors, { INVALID_ARGUMENT: 1 });
  assert.equal(a.stats().calls_waited, 1);
  await a.close();
});

test('stats: runway_ms is what a collection holds at the rate it handed numbers out lately', async () => {
  const d = await double();
  let now = 1000;
  const a = new HiloClient({ targets: [d.target], clock: () => now });
  const issued = [];
  d.nextRangeHook = async (req, rules) => {
    const r = await rules.issue(req);
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
    [[false, ['96:32', '32:10']], [true, ['96:32']], [true, ['32:10']]],
  );
  assert.equal(await d.max('c'), 10n);
  assert.equal(a.stats().returns_applied, 2);
});

test('a return is retried after UNAVAILABLE, to the node that issued it', async () => {
  const d = await double();
  d.failReturns = 1;
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  await a.nextId('c');
  await a.close();
  assert.equal(d.returnCalls.length, 2);
  assert.equal(await d.max('c'), 1n);
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
  assert.equal(await d.max('c'), 1n);
});

test('returnUnusedRanges: a caller that runs dry waits for the returns, then gets a new range; no number of a returned range', async () => {
  const d = await double();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  for (let i = 0; i < 5; i++) await a.nextId('c');
  const release = d.hold();
  let returned = false;
  const returning = a.returnUnusedRanges().then(() => (returned = true));
  await until(() => d.returnCalls.length === 1, 5000, 'the return');
  // The range is retired before the return goes out: nothing is taken of it.
  assert.equal(a.collection('c').tryNextId(), undefined);
  let got = null;
  const waiting = a.nextId('c').then((id) => (got = id));
  await settle();
  assert.equal(got, null, 'a number handed out while its range was being returned');
  assert.equal(d.requests.length, 1, 'a NextRange went out before the return was answered');
  release();
  await within(returning, 5000, 'returnUnusedRanges');
  assert.equal(returned, true);
  await within(waiting, 5000, 'the waiting caller');
  assert.deepEqual(got, { number: 6n, tag: 'A' });
  assert.deepEqual(d.returnCalls[0].items.map((i) => `${i.end}:${i.last}`), ['32:5']);
  assert.equal(BigInt(d.requests[1].last_max), 5n); // the last number used, not the 32 handed back
  await a.close();
});

test("after a failover the next request reports the new node's range: a node far behind refuses the echo once", async () => {
  // CONTRACT.md R4 and R17: A issues 1-200 and then fails; B, whose guard
  // rail allows a last_max at most 100 above its Max, refuses the echo of
  // A's 200 and serves 1-32 without it. The request after reports B's 1-32,
  // not A's 200, so B answers it at once and the range grows to 33-96.
  const a = await double({ tag: 'A', size: 200 });
  const b = await double({ tag: 'B', args: ['--max_last_max_jump=100'] });
  const c = new HiloClient({ targets: [a.target, b.target], prefetchAt: 0 });
  for (let i = 1n; i <= 200n; i++) assert.deepEqual(await c.nextId('f'), { number: i, tag: 'A' });
  a.nextRangeHook = () => Object.assign(new Error('A is down'), { code: grpc.status.UNAVAILABLE });
  for (let i = 1n; i <= 33n; i++) assert.deepEqual(await c.nextId('f'), { number: i, tag: 'B' });
  assert.deepEqual(
    b.requests.map((r) => [BigInt(r.last_size), BigInt(r.last_max)]),
    [[200n, 200n], [0n, 0n], [32n, 32n]],
  );
  await c.close();
});

test('close while returnUnusedRanges is out waits for it, then closes; no call is served after', async () => {
  const d = await double();
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  await a.nextId('c');
  const release = d.hold();
  const returning = a.returnUnusedRanges();
  await until(() => d.returnCalls.length === 1, 5000, 'the return');
  let closed = false;
  const closing = a.close().then(() => (closed = true));
  await rejectsWith(a.nextId('c'), 'FAILED_PRECONDITION');
  await settle();
  assert.equal(closed, false, 'close resolved while a return was still out');
  release();
  await within(Promise.all([returning, closing]), 5000, 'return and close');
  assert.equal(d.returnCalls.length, 1); // close had nothing left to hand back
  assert.equal(a.stats().returns_applied, 1);
  assert.equal(await d.max('c'), 1n);
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
  // 1001 collections at once: above the server's default creations a minute.
  const d = await double({ args: ['--max_collection_creations_per_minute=2000'] });
  const a = new HiloClient({ targets: [d.target], prefetchAt: 0 });
  for (let i = 0; i < 1001; i++) await a.nextId(`c${i}`);
  await a.close();
  const sizes = d.returnCalls.map((c) => c.items.length);
  assert.equal(sizes.length, 2, String(sizes)); // 1000 items or 60 KiB per call, whichever comes first
  assert.ok(sizes.every((n) => n <= 1000), String(sizes));
  assert.equal(sizes[0] + sizes[1], 1001);
  assert.equal(a.stats().returns_applied, 1001);
  assert.equal(await d.max('c1000'), 1n);
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

// process.exit drops writes still queued for a pipe (asynchronous on
// POSIX): the last IDs printed, or the error line, never reached a reader
// that was slow to empty it. draw.js exits once its streams took them all.
test('draw.js: exits only once every write to stdout and stderr has gone out', async () => {
  const { exitWhenWritten } = await import(DRAW);
  const { Writable } = await import('node:stream');
  const held = []; // a pipe its reader empties when the test says: each write ends on release
  const pipe = () => new Writable({ write: (_chunk, _encoding, done) => held.push(done) });
  const out = pipe();
  const err = pipe();
  out.write('c/1-A\nc/2-A\n');
  out.write('c/3-A\n');
  err.write('draw: INTERNAL: x\n');
  const exits = [];
  exitWhenWritten(1, [out, err], (code) => exits.push(code), 10_000, () => {});
  let released = 0;
  while (held.length > 0) {
    await settle();
    assert.deepEqual(exits, [], `exited with ${held.length} writes still queued`);
    held.shift()();
    released++;
    await settle();
  }
  assert.deepEqual(exits, [1]);
  assert.equal(released, 5); // the three writes, and each stream's empty one behind them
});

// A reader that is gone (EPIPE) or stopped reading may not have the IDs
// drawn: draw.js then exits 1, and within its bound, however its streams
// answer.
test('draw.js: a failed last write, or writes queued past the bound, exit 1', async () => {
  const { exitWhenWritten } = await import(DRAW);
  const { Writable } = await import('node:stream');
  const fine = () => new Writable({ write: (_chunk, _encoding, done) => done() });
  const gone = new Writable({ write: (_chunk, _encoding, done) => done(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' })) });
  gone.on('error', () => {}); // the stream's own report of it
  const timers = [];
  const setTimer = (fire, ms) => timers.push({ fire, ms });
  let exits = [];
  exitWhenWritten(0, [gone, fine()], (code) => exits.push(code), 10_000, setTimer);
  await settle();
  assert.deepEqual(exits, [1]);
  timers.forEach((t) => t.fire());
  assert.deepEqual(exits, [1], 'exited twice');

  exits = [];
  timers.length = 0;
  const stuck = new Writable({ write: () => {} }); // never taken
  exitWhenWritten(0, [fine(), stuck], (code) => exits.push(code), 10_000, setTimer);
  await settle();
  assert.deepEqual(exits, []);
  assert.deepEqual(timers.map((t) => t.ms), [10_000]);
  timers[0].fire();
  assert.deepEqual(exits, [1]);

  exits = [];
  timers.length = 0;
  exitWhenWritten(0, [fine(), fine()], (code) => exits.push(code), 10_000, setTimer);
  await settle();
  assert.deepEqual(exits, [0]);
  timers.forEach((t) => t.fire());
  assert.deepEqual(exits, [0], 'the bound fired after a clean exit');
});

test('draw.js: replies that break the contract end the draw with INTERNAL on stderr, exit 1', async () => {
  const d = await double({ tag: 'A' });
  d.nextRangeHook = async (req, rules) => ({ ...(await rules.issue(req)), node_tag: 'ab!' });
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
