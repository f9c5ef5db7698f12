// Two builds of the client in one process, case by case and sample by
// sample (the order alternating), so that both see the same load: for a
// change that must not slow the fast path down, on a machine too busy for
// two separate runs to compare. Reports each build's ns/op (median, p10)
// and the median of the paired ratios B/A. Not a test.
//
//   node clients/node/bench/ab.mjs A_OUT/package B_OUT/package HOST:PORT
import { join } from 'node:path';

const [pkgA, pkgB, target] = process.argv.slice(2);
if (!target) throw new Error('usage: ab.mjs PACKAGE_A PACKAGE_B HOST:PORT');
const SAMPLES = Number(process.env.SAMPLES ?? 41);
const OPS = Number(process.env.OPS ?? 100000);
const builds = [];
for (const [label, pkg] of [['A', pkgA], ['B', pkgB]]) {
  const { HiloClient } = await import(join(pkg, 'dist/esm/index.js'));
  const client = new HiloClient({ targets: [target] });
  const name = `ab-${label}-${process.pid}`;
  builds.push({ client, name, handle: client.collection(name) });
}
const yieldNow = () => new Promise((r) => setImmediate(r));
let sink = 0;

// Each case runs `ops` operations on one build, letting I/O in (prefetches) every 1024.
const cases = {
  'await handle.nextId()': async (b, ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (await b.handle.nextId()).tag.length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'await client.nextId(name)': async (b, ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (await b.client.nextId(b.name)).tag.length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'await handle.nextDocumentId()': async (b, ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (await b.handle.nextDocumentId()).length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'await client.nextDocumentId(name)': async (b, ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (await b.client.nextDocumentId(b.name)).length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
  'handle.tryNextId() (sync)': async (b, ops) => {
    for (let i = 0; i < ops; i++) {
      sink += (b.handle.tryNextId() ?? (await b.handle.nextId())).tag.length;
      if ((i & 1023) === 1023) await yieldNow();
    }
  },
};

const quantile = (values, q) => [...values].sort((x, y) => x - y)[Math.floor(q * (values.length - 1))];
for (const run of Object.values(cases)) for (let i = 0; i < 5; i++) for (const b of builds) await run(b, OPS);
for (const [name, run] of Object.entries(cases)) {
  const perOp = [[], []];
  const ratios = [];
  for (let s = 0; s < SAMPLES; s++) {
    for (const k of s % 2 === 0 ? [0, 1] : [1, 0]) {
      const t0 = process.hrtime.bigint();
      await run(builds[k], OPS);
      perOp[k].push(Number(process.hrtime.bigint() - t0) / OPS);
    }
    ratios.push(perOp[1][s] / perOp[0][s]);
  }
  const show = (v) => `${quantile(v, 0.5).toFixed(1)} (p10 ${quantile(v, 0.1).toFixed(1)})`;
  console.log(
    `${name.padEnd(34)} A ${show(perOp[0])}  B ${show(perOp[1])} ns/op  B/A paired: median ${quantile(ratios, 0.5).toFixed(3)} (p10 ${quantile(ratios, 0.1).toFixed(3)}, p90 ${quantile(ratios, 0.9).toFixed(3)})`,
  );
}
console.log(`(sink ${sink % 7})`);
for (const b of builds) await b.client.close();
