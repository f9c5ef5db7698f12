// The conformance driver (clients/conformance/drivers/node/driver.mjs) run
// as the runner runs it, against a real hilo_server: PROTOCOL.md says that
// numbers which can pass 2^53 - 1 travel as decimal strings, so that no
// reader's JSON library rounds them. Here every number is past 2^53.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PKG, startServer, rawStub, call, within } from './helpers.mjs';

const DRIVER = join(dirname(fileURLToPath(import.meta.url)), '../../conformance/drivers/node/driver.mjs');

const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
});

/** The driver as a child: ask(request) writes one line and resolves with the raw answer line. */
function startDriver() {
  const proc = spawn('node', [DRIVER], { env: { ...process.env, HILO_NODE_PKG: PKG }, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  return {
    proc,
    async ask(request) {
      proc.stdin.write(JSON.stringify(request) + '\n');
      const { value, done } = await within(lines.next(), 20000, `driver answer to ${request.op}`);
      assert.equal(done, false, `driver closed stdout instead of answering ${request.op}`);
      return value;
    },
  };
}

/** A JSON number of 16 or more digits in a line: a value a double may have rounded. */
const LONG_NUMBER = /[:,[]\s*-?\d{16,}/;

test('driver: IDs and counters past 2^53 - 1 are exact decimal strings, never JSON numbers', async () => {
  const s = await startServer({ args: [`--max_last_max_jump=${2n ** 62n}`] });
  servers.push(s);
  // Any client may report a last_max; the server then starts above it.
  const edge = 2n ** 53n - 3n;
  const stub = rawStub(s.target);
  await call(stub, 'NextRange', { collection: 'edge', last_size: '0', last_max: edge.toString() });
  stub.close();
  const d = startDriver();
  try {
    const answers = [];
    const ask = async (request) => {
      const line = await d.ask(request);
      assert.doesNotMatch(line, LONG_NUMBER, `a long JSON number in the answer to ${request.op}: ${line}`);
      const answer = JSON.parse(line);
      assert.equal(answer.ok, true, line);
      answers.push(answer);
      return answer;
    };
    await ask({ op: 'open', targets: [s.target], prefetch_at: 0 });
    // The server issues edge+33 .. edge+64 (its Max was edge+32): 2^53 - 3 + 33 = 2^53 + 30.
    const first = edge + 33n;
    const numbers = [];
    for (let i = 0; i < 3; i++) {
      const a = await ask({ op: 'next_id', collection: 'edge' });
      assert.equal(typeof a.number, 'string');
      numbers.push(a.number);
      assert.equal(a.tag, 'A');
    }
    assert.deepEqual(numbers, [first, first + 1n, first + 2n].map(String));
    assert.equal((await ask({ op: 'next_document_id', collection: 'edge' })).document_id, `edge/${first + 3n}-A`);
    const drawn = await ask({ op: 'draw', collection: 'edge', callers: 2, count: 3 });
    assert.deepEqual(drawn.errors, {});
    assert.deepEqual(
      [...drawn.document_ids].sort(),
      [4n, 5n, 6n, 7n, 8n, 9n].map((i) => `edge/${first + i}-A`).sort(),
    );
    const { stats } = await ask({ op: 'stats' });
    for (const name of ['calls_waited', 'ranges_fetched', 'ranges_prefetched', 'failovers', 'returns_applied', 'returns_refused', 'returns_failed']) {
      assert.match(stats[name], /^[0-9]+$/, `stats.${name} is ${JSON.stringify(stats[name])}, not a decimal string`);
    }
    assert.equal(stats.ranges_fetched, '1');
    await ask({ op: 'close' });
    await ask({ op: 'exit' });
    const code = await within(new Promise((r) => (d.proc.exitCode !== null ? r(d.proc.exitCode) : d.proc.once('exit', r))), 10000, 'driver exit');
    assert.equal(code, 0);
  } finally {
    d.proc.kill('SIGKILL');
  }
});
