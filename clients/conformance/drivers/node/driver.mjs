// The Node client's conformance driver: one HiloClient, driven by JSON lines
// on stdin, one answer per line on stdout (clients/conformance/PROTOCOL.md).
// Numbers that can pass 2^53 - 1 (IDs, counters) travel as decimal strings:
// every answer goes through encode(), which turns a bigint into its digits
// and refuses to write a JS number that is not a safe integer, so no number
// past 2^53 - 1 ever leaves as a JSON number (a reader would round it).
//
//   HILO_NODE_PKG=BUILD/package node driver.mjs   (build.sh writes a wrapper)
import { createInterface } from 'node:readline';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const { HiloClient, HiloError } = await import(join(process.env.HILO_NODE_PKG, 'dist/esm/index.js'));

let client = null;

function fail(e) {
  if (e instanceof HiloError) return { ok: false, code: e.codeName, message: e.message };
  return { ok: false, code: 'DRIVER', message: String(e?.message ?? e) };
}

function need(req, field, type) {
  if (typeof req[field] !== type) throw new Error(`request field "${field}" must be a ${type}`);
  return req[field];
}

function active() {
  if (client === null) throw new Error('no client: send "open" first');
  return client;
}

/** `callers` async callers, each drawing `count` IDs or until `millis` passed. */
async function draw(req) {
  const c = active();
  const collection = need(req, 'collection', 'string');
  const callers = need(req, 'callers', 'number');
  const count = typeof req.count === 'number' ? req.count : Infinity;
  const end = typeof req.millis === 'number' ? performance.now() + req.millis : Infinity;
  if (count === Infinity && end === Infinity) throw new Error('draw needs "count" or "millis"');
  const keepGoing = req.keep_going === true;
  const ids = [];
  const errors = {};
  const handle = c.collection(collection);
  async function caller() {
    for (let i = 0; i < count && performance.now() < end; i++) {
      try {
        ids.push(await handle.nextDocumentId());
      } catch (e) {
        const code = e instanceof HiloError ? e.codeName : 'DRIVER';
        errors[code] = (errors[code] ?? 0) + 1;
        if (!keepGoing) return;
        await new Promise((r) => setTimeout(r, 2)); // let the node come back
      }
      // A cached range never yields to I/O: let prefetches and timers run.
      if (i % 256 === 255) await new Promise((r) => setImmediate(r));
    }
  }
  await Promise.all(Array.from({ length: callers }, caller));
  return { ok: true, document_ids: ids, errors };
}

async function handle(req) {
  switch (req.op) {
    case 'open': {
      if (client !== null) await client.close();
      client = null;
      const options = {
        targets: need(req, 'targets', 'object'),
        separator: req.separator,
        prefetchAt: req.prefetch_at,
        rpcDeadlineMs: req.rpc_deadline_ms,
      };
      if (typeof req.ca_file === 'string') options.tls = { ca: readFileSync(req.ca_file) };
      client = new HiloClient(options);
      return { ok: true };
    }
    case 'next_id': {
      const id = await active().nextId(need(req, 'collection', 'string'));
      return { ok: true, number: id.number.toString(), tag: id.tag };
    }
    case 'next_document_id':
      return { ok: true, document_id: await active().nextDocumentId(need(req, 'collection', 'string')) };
    case 'draw':
      return draw(req);
    case 'fork':
      // Node does not fork: cluster and child_process start fresh processes.
      return { ok: true, forked: false };
    case 'stats': {
      const s = active().stats();
      const stats = {};
      for (const [k, v] of Object.entries(s)) if (typeof v === 'number') stats[k] = String(v);
      stats.errors = Object.fromEntries(Object.entries(s.errors).map(([k, v]) => [k, String(v)]));
      return { ok: true, stats };
    }
    case 'close':
      if (req.keep_open === true) {
        // Hands the ranges back and keeps the client (PROTOCOL.md).
        await active().returnUnusedRanges();
        return { ok: true, kept_open: true };
      }
      await active().close();
      return { ok: true };
    case 'exit':
      return { ok: true, exit: true };
    default:
      throw new Error(`unknown op ${JSON.stringify(req.op)}`);
  }
}

/** One answer as a JSON line: bigints as decimal strings, never a number past 2^53 - 1. */
function encode(answer) {
  return JSON.stringify(answer, (key, v) => {
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'number' && !Number.isSafeInteger(v)) {
      throw new Error(`answer field "${key}" is the JS number ${v}, not a safe integer; send it as a decimal string`);
    }
    return v;
  });
}

/** Writes one answer line; lines are never interleaved (one write each). */
async function write(answer) {
  let text;
  try {
    text = encode(answer);
  } catch (e) {
    text = encode({ ...fail(e), ...(answer.id === undefined ? {} : { id: answer.id }) });
  }
  await new Promise((r) => process.stdout.write(text + '\n', r));
}

async function answerTo(line) {
  try {
    const req = JSON.parse(line);
    if (req === null || typeof req !== 'object') throw new Error('a request is a JSON object');
    return await handle(req);
  } catch (e) {
    return fail(e);
  }
}

// Requests that carry an "id" are answered whenever they are done, with that id, while the next
// requests are read (PROTOCOL.md); the others in order.
const inFlight = new Set();
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === '') continue;
  let id;
  try {
    id = JSON.parse(line)?.id;
  } catch {
    id = undefined;
  }
  if (typeof id === 'string') {
    const p = answerTo(line).then((answer) => {
      delete answer.exit;
      return write({ ...answer, id });
    });
    inFlight.add(p);
    p.finally(() => inFlight.delete(p));
    continue;
  }
  const answer = await answerTo(line);
  const exit = answer.exit === true;
  delete answer.exit;
  await write(answer);
  if (exit) break;
}
await Promise.all(inFlight);
if (client !== null) await client.close();
process.exit(0);
