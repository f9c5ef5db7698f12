// Microbenchmarks of the Node client's fast path against a live hilo_server:
// nextId (on a CollectionHandle, and on the client by name) against
// incrementing a local counter, nextDocumentId against crypto.randomUUID().
// Each case is warmed up, then timed in SAMPLES samples of OPS operations;
// the report gives ns/op as median, p10, p90 over samples.
// Not a test: speeds vary by machine. Run it on an idle machine:
//
//   clients/node/build.sh OUT && HILO_NODE_PKG=OUT/package \
//     node clients/node/bench/bench.mjs HOST:PORT
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';

const { HiloClient } = await import(join(process.env.HILO_NODE_PKG, 'dist/esm/index.js'));
const target = process.argv[2];
if (!target) throw new Error('usage: bench.mjs HOST:PORT');
const SAMPLES = Number(process.env.SAMPLES ?? 15);
const OPS = Number(process.env.OPS ?? 200000);
let sink = 0;

const client = new HiloClient({ targets: [target] });
const ids = client.collection('bench-' + process.pid);
const yieldNow = () => new Promise((r) => setImmediate(r));

// Every case runs `ops` operations; the async ones let I/O in (prefetches)
// every 1024 operations, as any program that awaits would.
const cases = {
  'local counter (number, ++)': async (ops) => {
    let c = 0;
    for (let i = 0; i < ops; i++) c++;
    sink += c;
  },
  'local counter (bigint, ++)': async (ops) => {
    let c = 0n;
    for (let i = 0; i < ops; i++) c++;
    sink += Number(c & 1n);
  },
  'await nextId()': async (ops) => {
    for (let i = 0; i < ops; i++) {
      const id = await ids.nextId();
      sink += id.tag.length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'await client.nextId(name)': async (ops) => {
    for (let i = 0; i < ops; i++) {
      const id = await client.nextId(ids.name);
      sink += id.tag.length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'tryNextId() (sync)': async (ops) => {
    for (let i = 0; i < ops; i++) {
      const id = ids.tryNextId() ?? (await ids.nextId());
      sink += id.tag.length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'crypto.randomUUID()': async (ops) => {
    for (let i = 0; i < ops; i++) sink += randomUUID().length;
  },
  'await nextDocumentId()': async (ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (await ids.nextDocumentId()).length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'await client.nextDocumentId(name)': async (ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (await client.nextDocumentId(ids.name)).length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'tryNextDocumentId() (sync)': async (ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (ids.tryNextDocumentId() ?? (await ids.nextDocumentId())).length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
};

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// Warm-up: every case, long enough for the JIT and for the ranges to grow.
for (const run of Object.values(cases)) for (let i = 0; i < 5; i++) await run(OPS);
const results = {};
for (const [name, run] of Object.entries(cases)) {
  const perOp = [];
  for (let s = 0; s < SAMPLES; s++) {
    const t0 = process.hrtime.bigint();
    await run(OPS);
    perOp.push(Number(process.hrtime.bigint() - t0) / OPS);
  }
  perOp.sort((a, b) => a - b);
  results[name] = { median: quantile(perOp, 0.5), p10: quantile(perOp, 0.1), p90: quantile(perOp, 0.9) };
  console.log(
    `${name.padEnd(30)} ${results[name].median.toFixed(1).padStart(7)} ns/op  (p10 ${results[name].p10.toFixed(1)}, p90 ${results[name].p90.toFixed(1)})`,
  );
}
const ratio = (a, b) => (results[a].median / results[b].median).toFixed(2);
console.log(`await nextDocumentId / randomUUID: ${ratio('await nextDocumentId()', 'crypto.randomUUID()')}`);
console.log(`tryNextDocumentId / randomUUID:    ${ratio('tryNextDocumentId() (sync)', 'crypto.randomUUID()')}`);
console.log(`await nextId / number counter:     ${ratio('await nextId()', 'local counter (number, ++)')}`);
console.log(`tryNextId / number counter:        ${ratio('tryNextId() (sync)', 'local counter (number, ++)')}`);
console.log(`stats: ${JSON.stringify(client.stats())} (sink ${sink % 10})`);
await client.close();
