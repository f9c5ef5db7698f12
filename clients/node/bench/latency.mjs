// Times every call of the Node client, not their mean: `await
// client.nextId(name)` and `await client.nextDocumentId(name)` on one event
// loop, flat out with prefetch on, against one server (bench/client_latency.sh
// puts a proxy 2 ms away in front of a real hilo_server), each for SECONDS on
// a fresh client and collection (a cold start: refills included), after a
// warm-up of both calls for the JIT. The loop lets I/O in every 1024 calls
// (setImmediate, not timed), as any program that awaits would; a loop that
// never did would never see a prefetched range arrive. Prints one RESULT line
// per run, the columns every language's latency benchmark prints (times in
// nanoseconds). Not a test: it asserts nothing about speed.
//
// A client lives on one event loop: worker threads would each need a client
// of their own, which is two processes' worth of clients, not two threads
// sharing one; so Node runs on one thread only ("threads=1").
//
//   clients/node/build.sh OUT && HILO_NODE_PKG=OUT/package \
//     node clients/node/bench/latency.mjs HOST:PORT [SECONDS]
import { join } from 'node:path';

const { HiloClient } = await import(join(process.env.HILO_NODE_PKG, 'dist/esm/index.js'));
const target = process.argv[2];
if (!target) throw new Error('usage: latency.mjs HOST:PORT [SECONDS]');
const seconds = Number(process.argv[3] ?? 3);
const FINE_NANOS = 10000; // exact to the nanosecond below this; slower kept whole
const yieldNow = () => new Promise((r) => setImmediate(r));
let sink = 0;

// Call times; a percentile is the sample of rank floor(q * count), as in
// bench/latency_histogram.h.
class Recorder {
  fine = new Float64Array(FINE_NANOS);
  slow = [];
  count = 0;
  max = 0;
  slow1us = 0;

  record(ns) {
    if (ns < FINE_NANOS) this.fine[ns]++;
    else this.slow.push(ns);
    if (ns >= 1000) this.slow1us++;
    if (ns > this.max) this.max = ns;
    this.count++;
  }

  percentile(q) {
    if (this.count === 0) return 0;
    const rank = Math.min(this.count - 1, Math.floor(q * this.count));
    let seen = 0;
    for (let ns = 0; ns < FINE_NANOS; ns++) {
      seen += this.fine[ns];
      if (seen > rank) return ns;
    }
    return this.slow.sort((a, b) => a - b)[rank - seen];
  }
}

async function draw(name, callName, secs) {
  const client = new HiloClient({ targets: [target] });
  const collection = `latency-node-${callName}-${process.pid}-${Date.now()}`;
  const call =
    callName === 'NextId'
      ? async () => (await client.nextId(collection)).tag.length
      : async () => (await client.nextDocumentId(collection)).length;
  const r = new Recorder();
  const begin = process.hrtime.bigint();
  const end = begin + BigInt(Math.round(secs * 1e9));
  let now = begin;
  for (let i = 1; now < end; i++) {
    const start = now;
    sink += await call();
    now = process.hrtime.bigint();
    r.record(Number(now - start));
    if ((i & 1023) === 0) {
      await yieldNow();
      now = process.hrtime.bigint();
    }
  }
  const elapsed = Number(process.hrtime.bigint() - begin) / 1e9;
  const waited = client.stats().calls_waited;
  await client.close();
  if (name === 'warm-up') return;
  console.log(
    `RESULT lang=Node call=${callName} prefetch=on threads=1 calls=${r.count} waited=${waited} ` +
      `p50=${r.percentile(0.5)} p99=${r.percentile(0.99)} p999=${r.percentile(0.999)} ` +
      `p9999=${r.percentile(0.9999)} max=${r.max} slow_1us=${r.slow1us} seconds=${elapsed.toFixed(3)}`,
  );
}

await draw('warm-up', 'NextId', 1);
await draw('warm-up', 'NextDocumentId', 1);
for (const callName of ['NextId', 'NextDocumentId']) await draw(callName, callName, seconds);
console.log(`(sink ${sink % 10})`);
