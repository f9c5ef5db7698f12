// HiloClient against real hilo_server processes: the contract of README
// "The contract" and clients/CONTRACT.md, seen from the client's side.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HiloClient, StatusCode, startServer, rawStub, call, rejectsWith, until, within } from './helpers.mjs';

const servers = [];
async function server(opts) {
  const s = await startServer(opts);
  servers.push(s);
  return s;
}
after(async () => {
  for (const s of servers) await s.stop();
});

async function draw(client, collection, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await client.nextDocumentId(collection));
  return out;
}

test('the first client gets 1-32 and a second client continues at 33', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const b = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const first = await draw(a, 'orders', 32);
  assert.deepEqual(first, Array.from({ length: 32 }, (_, i) => `orders/${i + 1}-A`));
  assert.deepEqual(await b.nextId('orders'), { number: 33n, tag: 'A' });
  assert.equal(a.stats().ranges_fetched, 1);
  assert.equal(a.stats().calls_waited, 1);
  await a.close();
  await b.close();
});

test('ranges double while a client asks often: 1-32, 33-96, 97-224', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const ids = await draw(a, 'grow', 97);
  assert.equal(ids[96], 'grow/97-A');
  assert.equal(a.stats().ranges_fetched, 3);
  const b = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  assert.equal(await b.nextDocumentId('grow'), 'grow/225-A');
  await a.close();
  await b.close();
});

test('close hands back the tail and the range fetched ahead; the next client continues after the last number used', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target] });
  await draw(a, 'tail', 7); // the 7th number (a fifth of 32, rounded up) starts the prefetch
  await until(() => a.stats().ranges_prefetched === 1, 5000, 'prefetch');
  await a.close();
  assert.equal(a.stats().returns_applied, 2, JSON.stringify(a.stats()));
  assert.equal(a.stats().returns_refused, 0);
  const b = new HiloClient({ targets: [s.target] });
  assert.equal(await b.nextDocumentId('tail'), 'tail/8-A');
  await b.close();
});

test('returnUnusedRanges hands back the tail and the range fetched ahead, and keeps the client: its next range starts after the last number used', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target] });
  await draw(a, 'keep', 7); // the 7th starts the prefetch of 33-96
  await until(() => a.stats().ranges_prefetched === 1, 5000, 'prefetch');
  await a.returnUnusedRanges();
  assert.deepEqual([a.stats().returns_applied, a.stats().returns_refused, a.stats().returns_failed], [2, 0, 0]);
  assert.equal(a.stats().runway_ms.keep, undefined); // holds nothing
  // The node's Max is back at 7: the next range starts at 8, below the 96
  // this client held of node A, and is accepted (CONTRACT.md R11).
  assert.deepEqual(await draw(a, 'keep', 2), ['keep/8-A', 'keep/9-A']);
  assert.equal(a.stats().ranges_fetched, 3);
  await a.close();
  await rejectsWith(a.returnUnusedRanges(), 'FAILED_PRECONDITION');
  const b = new HiloClient({ targets: [s.target] });
  assert.equal(await b.nextDocumentId('keep'), 'keep/10-A');
  await b.close();
});

test('collection() gives the same handle for a name while the client keeps the collection', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target] });
  const h = a.collection('h');
  assert.equal(h.name, 'h');
  assert.notEqual(a.collection('h'), h); // made, never called: kept nowhere
  await h.nextId();
  assert.equal(a.collection('h'), h); // its first call made the client keep the collection, and it
  assert.notEqual(a.collection('h'), a.collection('i'));
  await a.nextId('j');
  assert.equal(a.collection('j'), a.collection('j')); // kept through a call by name
  await a.close();
});

// Making a handle keeps nothing in the client (README, "Collections"): a
// caller that makes handles for many names (its users', or new names past
// the server's --max_collections) must not grow the client by one cache
// per name when nothing is ever fetched for them.
test('1000 handles made and never called, names the server refuses and valid ones, keep nothing in the client; a collection in use is unaffected', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const used = a.collection('used');
  assert.deepEqual(await used.nextId(), { number: 1n, tag: 'A' });
  const name = (i) => (i % 4 === 0 ? `bad\u0001${i}` : i % 4 === 1 ? 'x'.repeat(257) + i : `valid${i}`);
  const made = [];
  for (let i = 0; i < 1000; i++) {
    made.push(a.collection(name(i)));
    if (i % 250 === 0) assert.equal(await a.nextDocumentId('used'), `used/${2 + i / 250}-A`);
  }
  assert.deepEqual([...a.caches.keys()], ['used']);
  assert.deepEqual([...a.handles.keys()], ['used']);
  // A synchronous miss is a call that keeps nothing either: no number held, none fetched.
  for (const h of made) assert.equal(h.tryNextId() ?? h.tryNextDocumentId(), undefined);
  assert.deepEqual([...a.caches.keys()], ['used']);
  assert.deepEqual([...a.handles.keys()], ['used']);
  assert.equal(a.collection('used'), used);
  assert.deepEqual(await used.nextId(), { number: 6n, tag: 'A' });
  assert.deepEqual(used.tryNextId(), { number: 7n, tag: 'A' });
  const stats = a.stats();
  assert.deepEqual([stats.ranges_fetched, stats.calls_waited, stats.errors], [1, 1, {}]);
  assert.deepEqual(Object.keys(stats.runway_ms), ['used']);
  await a.close();
  assert.equal(a.stats().returns_applied, 1);
  // Nor does a closed client keep a handle made, or called, after close.
  for (let i = 0; i < 100; i++) {
    const h = a.collection(`late${i}`);
    if (i % 2 === 0) await rejectsWith(h.nextId(), 'FAILED_PRECONDITION');
  }
  assert.deepEqual([...a.caches.keys()], ['used']);
  assert.deepEqual([...a.handles.keys()], ['used']);
  const b = new HiloClient({ targets: [s.target] });
  assert.equal(await b.nextDocumentId('used'), 'used/8-A');
  assert.equal(await b.nextDocumentId('valid2'), 'valid2/1-A'); // nothing was taken of it
  await b.close();
});

test('a handle made, then called, gets 1, 2, 3 on a fresh server as a fresh client would; the client keeps its cache from its first call', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const h = a.collection('fresh');
  assert.equal(a.caches.size, 0);
  assert.equal(h.tryNextId(), undefined); // holds no range; fetches none, keeps nothing
  assert.equal(a.caches.size, 0);
  assert.deepEqual(await h.nextId(), { number: 1n, tag: 'A' });
  assert.deepEqual([...a.caches.keys()], ['fresh']);
  assert.deepEqual([...a.handles.keys()], ['fresh']);
  assert.equal(await h.nextDocumentId(), 'fresh/2-A');
  assert.deepEqual(h.tryNextId(), { number: 3n, tag: 'A' });
  assert.equal(h.tryNextDocumentId(), 'fresh/4-A');
  assert.equal(await a.nextDocumentId('fresh'), 'fresh/5-A'); // the same cache, by name
  assert.deepEqual([a.stats().calls_waited, a.stats().ranges_fetched], [1, 1]);
  await a.close();
  assert.equal(a.stats().returns_applied, 1);
  const b = new HiloClient({ targets: [s.target] });
  assert.equal(await b.nextDocumentId('fresh'), 'fresh/6-A');
  await b.close();
});

// Handles made before any call, first called all at once, share the one
// cache the client keeps: one client, no prefetch, nothing returned, so
// the numbers are 1..n, each once. Handles made before close and first
// called after it fail and keep nothing.
test('50 handles on one name, first called at once, draw 1..50 from one cache; handles made before close fail after it and keep nothing', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const handles = Array.from({ length: 50 }, () => a.collection('together'));
  const ids = await Promise.all(handles.map((h) => h.nextId()));
  assert.deepEqual(
    ids.map((id) => id.number).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)),
    Array.from({ length: 50 }, (_, i) => BigInt(i + 1)),
  );
  assert.deepEqual([...a.caches.keys()], ['together']);
  const kept = a.caches.get('together');
  for (const h of handles) assert.equal(h.cache, kept);
  assert.equal(a.collection('together'), a.handles.get('together'));
  assert.deepEqual([a.stats().ranges_fetched, a.stats().calls_waited], [2, 50]);
  const early = [a.collection('together'), a.collection('never')];
  await a.close();
  for (const h of early) {
    await rejectsWith(h.nextId(), 'FAILED_PRECONDITION');
    assert.equal(h.tryNextId(), undefined);
  }
  assert.deepEqual([...a.caches.keys()], ['together']);
  assert.deepEqual([...a.handles.keys()], ['together']);
  const b = new HiloClient({ targets: [s.target] });
  assert.equal(await b.nextDocumentId('never'), 'never/1-A');
  await b.close();
});

test('many concurrent callers on a dry collection cause exactly one NextRange', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const ids = await within(Promise.all(Array.from({ length: 25 }, () => a.nextId('flight'))), 10000, 'callers');
  assert.equal(a.stats().ranges_fetched, 1);
  assert.equal(a.stats().calls_waited, 25);
  assert.deepEqual(ids.map((i) => i.number).sort((x, y) => (x < y ? -1 : 1)), Array.from({ length: 25 }, (_, i) => BigInt(i + 1)));
  await a.close();
});

test('IDs past 2^53 - 1 stay exact: consecutive bigints and exact document IDs', async () => {
  // A client may move Max by a bounded jump; this server allows up to 2^62.
  const s = await server({ args: [`--max_last_max_jump=${2n ** 62n}`] });
  const stub = rawStub(s.target);
  // Any client may report a last_max; the server then starts above it.
  const edge = 2n ** 53n - 3n;
  await call(stub, 'NextRange', { collection: 'edge', last_size: '0', last_max: edge.toString() });
  await call(stub, 'NextRange', { collection: 'big', last_size: '0', last_max: (2n ** 62n).toString() });
  stub.close();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  const numbers = [];
  for (let i = 0; i < 8; i++) numbers.push((await a.nextId('edge')).number);
  // A JS number would give 2^53 twice: 2^53 + 1 is not representable.
  assert.deepEqual(numbers, Array.from({ length: 8 }, (_, i) => edge + 33n + BigInt(i)));
  const big = 2n ** 62n + 33n;
  assert.deepEqual(await a.nextId('big'), { number: big, tag: 'A' });
  assert.equal(await a.nextDocumentId('big'), `big/${big + 1n}-A`);
  await a.close();
  assert.equal(a.stats().returns_applied, 2);
  const b = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  assert.equal(await b.nextDocumentId('big'), `big/${big + 2n}-A`);
  await b.close();
});

test('separator: "|", "-" and every digit are INVALID_ARGUMENT naming the rule; another character is used as given', async () => {
  // CONTRACT.md R12: a "-" separator would make the number (read between
  // the last separator and the last "-") ambiguous, so it is refused too.
  for (const sep of ['-', '|', ...'0123456789']) {
    assert.throws(
      () => new HiloClient({ targets: ['127.0.0.1:1'], separator: sep }),
      (e) =>
        e.codeName === 'INVALID_ARGUMENT' &&
        e.code === StatusCode.INVALID_ARGUMENT &&
        e.message.includes(`'${sep}'`) &&
        e.message.includes("other than '|', '-' and 0-9"),
    );
  }
  const s = await server();
  const a = new HiloClient({ targets: [s.target], separator: '#' });
  assert.equal(await a.nextDocumentId('sep'), 'sep#1-A');
  await a.close();
});

test('a bad collection name is INVALID_ARGUMENT from the server, not tried on the next target', async () => {
  const s1 = await server({ tag: 'A' });
  const s2 = await server({ tag: 'B' });
  const a = new HiloClient({ targets: [s1.target, s2.target] });
  const e = await rejectsWith(a.nextId(''), 'INVALID_ARGUMENT');
  assert.match(e.message, new RegExp(s1.target));
  assert.equal(a.stats().failovers, 0);
  await a.close();
});

// A client keeps a collection (its cache, and its handle) only once it
// received a range: a caller naming many collections the server refuses
// (names taken from its own users, say) must not grow the client by one
// each, and stats() still counts every failure. `caches` and `handles` are
// the client's private tables (TypeScript-private: plain properties here).
test('collections the server refuses are not kept: 400 bad names leave only the good one, every error counted', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target] });
  assert.deepEqual(await a.nextId('kept'), { number: 1n, tag: 'A' });
  for (let i = 0; i < 200; i++) {
    await rejectsWith(a.nextId(`bad\u0001${i}`), 'INVALID_ARGUMENT');
    await rejectsWith(a.nextDocumentId('x'.repeat(257) + i), 'INVALID_ARGUMENT');
  }
  // Through a handle, twice (the second call finds its cache forgotten).
  const h = a.collection('handle\u0002bad');
  await rejectsWith(h.nextId(), 'INVALID_ARGUMENT');
  await rejectsWith(h.nextDocumentId(), 'INVALID_ARGUMENT');
  // 20 callers at once on one refused name share one NextRange and its error.
  const many = await Promise.allSettled(Array.from({ length: 20 }, () => a.nextId('crowd\u0003bad')));
  assert.ok(many.every((r) => r.status === 'rejected' && r.reason.codeName === 'INVALID_ARGUMENT'));
  // A call given an aborted signal on a new name fetches nothing and keeps nothing.
  await rejectsWith(a.nextId('never', { signal: AbortSignal.abort() }), 'CANCELLED');
  assert.deepEqual([...a.caches.keys()], ['kept']);
  assert.deepEqual([...a.handles.keys()], []);
  const stats = a.stats();
  assert.deepEqual(stats.errors, { INVALID_ARGUMENT: 403 });
  assert.equal(stats.calls_waited, 1 + 400 + 2 + 20);
  assert.equal(stats.ranges_fetched, 1);
  assert.deepEqual(Object.keys(stats.runway_ms), ['kept']);
  assert.deepEqual(await a.nextId('kept'), { number: 2n, tag: 'A' });
  await a.close();
  assert.equal(a.stats().returns_applied, 1);
  const b = new HiloClient({ targets: [s.target] });
  assert.equal(await b.nextDocumentId('kept'), 'kept/3-A');
  await b.close();
});

test('new collections refused past --max_collections are not kept; every RESOURCE_EXHAUSTED counted', async () => {
  const s = await server({ args: ['--max_collections=1'] });
  const a = new HiloClient({ targets: [s.target] });
  assert.deepEqual(await a.nextId('first'), { number: 1n, tag: 'A' });
  for (let i = 0; i < 50; i++) await rejectsWith(a.nextId(`new${i}`), 'RESOURCE_EXHAUSTED');
  assert.deepEqual([...a.caches.keys()], ['first']);
  assert.deepEqual(a.stats().errors, { RESOURCE_EXHAUSTED: 50 });
  assert.deepEqual(await a.nextId('first'), { number: 2n, tag: 'A' });
  await a.close();
});

test('callers that find a forgotten collection still in the table get numbers from a new cache; its counters count once', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target] });
  await rejectsWith(a.nextId(''), 'INVALID_ARGUMENT');
  assert.equal(a.caches.size, 0);
  // The window between a failed call forgetting a cache and the client
  // dropping it, which one thread of JavaScript never shows: a cache in the
  // table that never received a range, with the counters failed calls
  // would have left on it, forgotten but not yet dropped. (The client's
  // private cache(name) puts it in the table: making a handle does not.)
  const f = a.cache('late');
  const h = a.collection('late');
  assert.equal(h.cache, f);
  f.counters.calls_waited += 3;
  f.errors.set(StatusCode.UNAVAILABLE, 2);
  assert.equal(f.forgetIfUnused(), true);
  assert.equal(a.caches.get('late'), f);
  const counted = { INVALID_ARGUMENT: 1, UNAVAILABLE: 2 };
  assert.deepEqual(a.stats().errors, counted);
  // Two callers find it at once, by name and through the handle.
  const got = await within(Promise.all([a.nextId('late'), h.nextId()]), 10000, 'callers');
  assert.deepEqual(got.map((id) => id.number).sort(), [1n, 2n]);
  assert.notEqual(a.caches.get('late'), f);
  const stats = a.stats();
  assert.deepEqual(stats.errors, counted);
  assert.equal(stats.calls_waited, 1 + 3 + 2); // each caller waited once, on the new cache
  assert.equal(stats.ranges_fetched, 1);
  // The handle moved to the new cache: its next number without waiting.
  assert.deepEqual(h.tryNextId(), { number: 3n, tag: 'A' });
  assert.deepEqual(await a.collection('late').nextId(), { number: 4n, tag: 'A' });
  assert.equal(a.caches.get('late').forgetIfUnused(), false);
  // The forgotten cache hands out nothing and fetches nothing.
  assert.equal(f.tryId(), undefined);
  assert.equal(a.stats().ranges_fetched, 1);
  await a.close();
});

test('a collection that received a range is never forgotten, even when its next fetch fails', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0, rpcDeadlineMs: 1000 });
  const h = a.collection('held');
  assert.deepEqual(await h.nextId(), { number: 1n, tag: 'A' });
  const c = a.caches.get('held');
  assert.equal(c.forgetIfUnused(), false);
  for (let i = 2; i <= 32; i++) assert.equal((await h.nextId()).number, BigInt(i));
  await s.stop();
  await rejectsWith(h.nextId(), 'UNAVAILABLE');
  await rejectsWith(a.nextId('held'), 'UNAVAILABLE');
  assert.equal(a.caches.get('held'), c);
  assert.equal(a.collection('held'), h);
  assert.equal(c.forgetIfUnused(), false);
  assert.deepEqual(a.stats().errors, { UNAVAILABLE: 2 });
  await a.close();
});

test('kill -9 of the node in use: the client moves to the next target, and no ID repeats', async () => {
  const s1 = await server({ tag: 'A' });
  const s2 = await server({ tag: 'B' });
  const a = new HiloClient({ targets: [s1.target, s2.target], prefetchAt: 0, rpcDeadlineMs: 2000 });
  const before = await draw(a, 'fo', 10);
  s1.signal('SIGKILL');
  const afterKill = await draw(a, 'fo', 40);
  const all = [...before, ...afterKill];
  assert.equal(new Set(all).size, 50);
  assert.equal(afterKill[21], 'fo/32-A'); // the cached range runs out first
  // B starts above the last_max the client reports, not at 1.
  assert.equal(afterKill[22], 'fo/33-B');
  assert.equal(a.stats().failovers, 1);
  await a.close();
});

test('SIGSTOP of the node in use: DEADLINE_EXCEEDED moves the client on; it stays with the one that answered', async () => {
  const s1 = await server({ tag: 'A' });
  const s2 = await server({ tag: 'B' });
  const a = new HiloClient({ targets: [s1.target, s2.target], prefetchAt: 0, rpcDeadlineMs: 300 });
  await draw(a, 'stop', 32);
  s1.signal('SIGSTOP');
  try {
    assert.equal(await a.nextDocumentId('stop'), 'stop/33-B');
    // B's range doubled (33-96); the next fetch asks B first: no second failover.
    await draw(a, 'stop', 63);
    assert.equal(await a.nextDocumentId('stop'), 'stop/97-B');
    assert.equal(a.stats().ranges_fetched, 3);
    assert.equal(a.stats().failovers, 1);
  } finally {
    s1.signal('SIGCONT');
  }
  await a.close();
});

test('with every target down, UNAVAILABLE names each; the client recovers when one is back', async () => {
  const s = await server();
  const port = s.port;
  await s.stop();
  const a = new HiloClient({ targets: [`127.0.0.1:${port}`, '127.0.0.1:1'], rpcDeadlineMs: 1000 });
  const e = await rejectsWith(a.nextId('down'), 'UNAVAILABLE');
  assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${port}.*127\\.0\\.0\\.1:1`));
  assert.equal(a.stats().errors.UNAVAILABLE, 1);
  await a.close();
});

test('a dns:/// target works', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [`dns:///127.0.0.1:${s.port}`] });
  assert.equal(await a.nextDocumentId('dns'), 'dns/1-A');
  await a.close();
});

test('TLS: the client checks the server certificate against the given CA', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hilo-node-tls-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
      '-subj', '/CN=hilo-test', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    const s = await server({ args: [`--tls_cert=${join(dir, 'cert.pem')}`, `--tls_key=${join(dir, 'key.pem')}`] });
    const a = new HiloClient({ targets: [`localhost:${s.port}`], tls: { ca: readFileSync(join(dir, 'cert.pem')) } });
    assert.equal(await a.nextDocumentId('tls'), 'tls/1-A');
    await a.close();
    assert.equal(a.stats().returns_applied, 1);
    const plain = new HiloClient({ targets: [s.target], rpcDeadlineMs: 1000 });
    await rejectsWith(plain.nextId('tls'), 'UNAVAILABLE');
    await plain.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('after close, a failed call waited for no range: calls_waited stays, for a name known before close and a new one', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], prefetchAt: 0 });
  assert.deepEqual(await a.nextId('known'), { number: 1n, tag: 'A' });
  assert.equal(a.stats().calls_waited, 1);
  await a.close();
  for (let i = 0; i < 3; i++) {
    await rejectsWith(a.nextId('known'), 'FAILED_PRECONDITION');
    await rejectsWith(a.collection('known').nextDocumentId(), 'FAILED_PRECONDITION');
    await rejectsWith(a.nextId('new'), 'FAILED_PRECONDITION');
    await rejectsWith(a.collection('new').nextId(), 'FAILED_PRECONDITION');
  }
  assert.equal(a.stats().calls_waited, 1);
  assert.equal(a.stats().ranges_fetched, 1);
});

// A name is the caller's: a message quotes it escaped, whole up to 256
// characters (a valid name is at most 256 bytes), else its first 64, so a huge name gives no huge message and a newline or ESC in a
// name never reaches a log raw.
test('messages quote a name escaped, and only the start of a name over 256 characters', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target], rpcDeadlineMs: 2000 });
  const huge = 'x'.repeat(1_000_000);
  // The server takes messages of up to 64 KiB.
  const open = await rejectsWith(a.nextId(huge), 'RESOURCE_EXHAUSTED');
  assert.ok(open.message.length < 400, `message of ${open.message.length} characters`);
  assert.ok(open.message.includes(`"${'x'.repeat(64)}"... (1000000 characters)`), open.message);
  const long = await rejectsWith(a.nextId('y'.repeat(255) + '\x01'), 'INVALID_ARGUMENT');
  assert.ok(long.message.includes(`"${'y'.repeat(255)}\\u0001"`), long.message);
  const raw = await rejectsWith(a.nextId('bad\nname\x1b[31m'), 'INVALID_ARGUMENT');
  assert.ok(!/[\n\x1b]/.test(raw.message), JSON.stringify(raw.message));
  assert.ok(raw.message.includes('"bad\\nname\\u001b[31m"'), raw.message);
  // Every target down: the message names the collection too.
  const down = new HiloClient({ targets: ['127.0.0.1:1'], rpcDeadlineMs: 500 });
  const gone = await rejectsWith(down.nextId(`${huge}\n`), 'UNAVAILABLE');
  assert.ok(gone.message.length < 400, `message of ${gone.message.length} characters`);
  const esc = await rejectsWith(down.nextId('down\x1b\n'), 'UNAVAILABLE');
  assert.ok(!/[\n\x1b]/.test(esc.message), JSON.stringify(esc.message));
  await down.close();
  await a.close();
  const closed = await rejectsWith(a.nextId(huge), 'FAILED_PRECONDITION');
  assert.ok(closed.message.length < 400, `message of ${closed.message.length} characters`);
  const closedRaw = await rejectsWith(a.collection('c\n\x1b').nextId(), 'FAILED_PRECONDITION');
  assert.ok(!/[\n\x1b]/.test(closedRaw.message), JSON.stringify(closedRaw.message));
  assert.ok(closedRaw.message.includes('"c\\n\\u001b"'), closedRaw.message);
});

test('after close every call is FAILED_PRECONDITION; close twice is one close; Symbol.asyncDispose closes', async () => {
  const s = await server();
  const a = new HiloClient({ targets: [s.target] });
  await a.nextId('closed');
  const p1 = a.close();
  assert.equal(a.close(), p1);
  await p1;
  await rejectsWith(a.nextId('closed'), 'FAILED_PRECONDITION');
  await rejectsWith(a.nextDocumentId('other'), 'FAILED_PRECONDITION');
  await rejectsWith(a.collection('another').nextId(), 'FAILED_PRECONDITION');
  // A closed client keeps no collection it never had.
  assert.deepEqual([...a.caches.keys()], ['closed']);
  assert.deepEqual([...a.handles.keys()], []);
  // Node 20 has Symbol.asyncDispose but not yet the `await using` syntax.
  const b = new HiloClient({ targets: [s.target] });
  assert.equal(await b.nextDocumentId('closed'), 'closed/2-A');
  await b[Symbol.asyncDispose]();
  await rejectsWith(b.nextId('closed'), 'FAILED_PRECONDITION');
  const c = new HiloClient({ targets: [s.target] });
  assert.equal(await c.nextDocumentId('closed'), 'closed/3-A');
  await c.close();
});

test('examples/node/draw.ts: concurrent callers print unique IDs, close, exit 0; a bad name is one line on stderr, exit 1', async () => {
  const s = await server();
  const draw = join(process.env.HILO_NODE_OUT, 'examples', 'draw.js');
  const { spawnSync } = await import('node:child_process');
  const ok = spawnSync('node', [draw, `--targets=${s.target}`, '--collection=draw', '--threads=3', '--seconds=0.3'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: 30000,
  });
  assert.equal(ok.status, 0, ok.stderr);
  const lines = ok.stdout.split('\n').filter((l) => l !== '');
  assert.ok(lines.length > 32, `only ${lines.length} IDs`);
  assert.equal(new Set(lines).size, lines.length);
  assert.ok(lines.every((l) => /^draw\/[1-9][0-9]*-A$/.test(l)), lines.find((l) => !/^draw\/[1-9][0-9]*-A$/.test(l)));
  const max = lines.reduce((m, l) => Math.max(m, Number(l.slice(5, -2))), 0);
  // The tails went back: the next client continues right after the highest ID drawn.
  const next = new HiloClient({ targets: [s.target] });
  assert.equal(await next.nextDocumentId('draw'), `draw/${max + 1}-A`);
  await next.close();
  const bad = spawnSync('node', [draw, `--targets=${s.target}`, '--collection=', '--threads=2', '--seconds=0.3'], {
    encoding: 'utf8',
    timeout: 30000,
  });
  assert.equal(bad.status, 1);
  assert.equal(bad.stdout, '');
  assert.match(bad.stderr, /^draw: INVALID_ARGUMENT: .*collection name is empty\n$/);
});
