// What the tests share: the package under test (built by build.sh into
// HILO_NODE_PKG), real hilo_server processes (HILO_SERVER_BIN) on port 0 with
// temporary databases, and an in-process double of the server.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';

/** True if every thread of `pid` is stopped (state T or t after the
 * command's closing parenthesis in /proc/PID/task/TID/stat). */
function allThreadsStopped(pid) {
  let tids;
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  if (tids.length === 0) return false;
  for (const tid of tids) {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
    } catch {
      continue; // the thread has exited
    }
    const state = stat[stat.lastIndexOf(')') + 2];
    if (state !== 'T' && state !== 't') return false;
  }
  return true;
}

/** Waits, up to 5 s, for every thread of `pid` to stop. */
function waitUntilStopped(pid) {
  const tick = new Int32Array(new SharedArrayBuffer(4));
  const giveUp = Date.now() + 5000;
  while (!allThreadsStopped(pid)) {
    if (Date.now() > giveUp) throw new Error(`hilo_server (pid ${pid}) not stopped 5 s after SIGSTOP`);
    Atomics.wait(tick, 0, 0, 1); // 1 ms
  }
}

export const PKG = process.env.HILO_NODE_PKG;
export const SERVER_BIN = process.env.HILO_SERVER_BIN;
if (!PKG || !SERVER_BIN) throw new Error('set HILO_NODE_PKG (build.sh OUT_DIR/package) and HILO_SERVER_BIN');

export const hilo = await import(join(PKG, 'dist/esm/index.js'));
/** The package's own (bundled) @grpc/grpc-js: credentials must come from the copy the client uses. */
export const grpc = createRequire(join(PKG, 'package.json'))('@grpc/grpc-js');
const proto = await import(join(PKG, 'dist/esm/proto.js'));
export const { HiloClient, HiloError, StatusCode } = hilo;

/** Rejects with `what` after `ms`: every wait in a test has a bound. */
export function within(promise, ms, what) {
  let timer;
  const bound = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** Asserts that `promise` rejects with a HiloError of `codeName`; returns it. */
export async function rejectsWith(promise, codeName) {
  try {
    await within(promise, 20000, `expected ${codeName}`);
  } catch (e) {
    if (!(e instanceof HiloError)) throw new Error(`expected HiloError ${codeName}, got ${e?.stack ?? e}`);
    if (e.codeName !== codeName) throw new Error(`expected ${codeName}, got ${e.codeName}: ${e.message}`);
    return e;
  }
  throw new Error(`expected ${codeName}, but it resolved`);
}

/** A real hilo_server on 127.0.0.1:0 with a fresh database; stop() kills it and removes the directory. */
export async function startServer({ tag = 'A', args = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'hilo-node-'));
  const proc = spawn(
    SERVER_BIN,
    [`--listen=127.0.0.1:0`, `--metrics_listen=127.0.0.1:0`, `--db=${join(dir, 'hilo.db')}`, '--create_db', `--node_tag=${tag}`, ...args],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  const port = await within(
    new Promise((resolve, reject) => {
      proc.stderr.on('data', (chunk) => {
        log += chunk;
        const m = /hilo_server: serving node \S+ on port (\d+)/.exec(log);
        if (m) resolve(Number(m[1]));
      });
      proc.on('exit', (code) => reject(new Error(`hilo_server exited with ${code}: ${log}`)));
    }),
    10000,
    'hilo_server start',
  );
  proc.stderr.resume();
  // If this test process dies without its after() hooks (killed outright),
  // the watchdog still stops the server and removes its directory.
  const watchdog = spawn(
    'sh',
    ['-c', 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -CONT "$2"; kill -KILL "$2"; rm -rf "$3"', 'watchdog', String(process.pid), String(proc.pid), dir],
    { detached: true, stdio: 'ignore' },
  );
  watchdog.unref();
  const server = {
    target: `127.0.0.1:${port}`,
    port,
    proc,
    /** Sends `sig`; after SIGSTOP, returns only once every thread of the
     * server is stopped (the kernel stops them asynchronously, and a request
     * sent at once could still be answered). */
    signal(sig) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(sig);
      if (sig === 'SIGSTOP') waitUntilStopped(proc.pid);
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGCONT');
        proc.kill('SIGKILL');
        await within(new Promise((r) => proc.once('exit', r)), 10000, 'hilo_server exit');
      }
      rmSync(dir, { recursive: true, force: true });
      watchdog.kill('SIGKILL');
    },
  };
  return server;
}

/** A stub on one target, for calls the tests make themselves (e.g. to move Max). */
export function rawStub(target) {
  const Stub = proto.hiloStubConstructor();
  return new Stub(target, grpc.credentials.createInsecure());
}

export function call(stub, method, request) {
  return new Promise((resolve, reject) =>
    stub[method](request, { deadline: Date.now() + 5000 }, (e, r) => (e ? reject(e) : resolve(r))),
  );
}

/**
 * An in-process double of hilo_server that keeps the server's rules for
 * ranges and returns (README "The contract"): low = max(Max, last_max) + 1,
 * 32 numbers a range, a random non-zero token per range, a return applied
 * only with the token of the range issued last and not retired, Max == end
 * and last >= the return floor; a whole return of a range right above the
 * previous one gives the previous one its token back; last > end is
 * INVALID_ARGUMENT, a return without a token FAILED_PRECONDITION, a
 * ReturnRanges of more than 1000 items INVALID_ARGUMENT. Tests
 * script deviations: `nextRangeHook(request, rules)` may answer instead of
 * the rules; `gate` holds every reply until opened; `returnsMode` =
 * 'unimplemented' answers ReturnRanges with UNIMPLEMENTED; `failReturns` =
 * n fails the next n ReturnRanges calls with UNAVAILABLE; `returnsError` =
 * { code, details } fails every ReturnRanges call with that status.
 */
export async function startDouble({ tag = 'A', size = 32 } = {}) {
  const collections = new Map();
  const d = {
    tag,
    requests: [], // NextRange requests, in order
    returnCalls: [], // each ReturnRanges call: its items; ReturnRange: [item] with single: true
    nextRangeHook: null,
    gate: null,
    returnsMode: 'ranges',
    failReturns: 0,
    returnsError: null,
    hold() {
      let open;
      d.gate = new Promise((r) => (open = r));
      return () => {
        d.gate = null;
        open();
      };
    },
    max(collection) {
      return collections.get(collection)?.max ?? 0n;
    },
  };
  const state = (name) => {
    let s = collections.get(name);
    if (!s) collections.set(name, (s = { max: 0n, floor: 0n, issued: [], live: null }));
    return s;
  };
  const rules = {
    issue(request) {
      const s = state(request.collection);
      const lastMax = BigInt(request.last_max);
      const low = (s.max > lastMax ? s.max : lastMax) + 1n;
      const high = low + BigInt(size) - 1n;
      const token = randomBytes(8).readBigUInt64BE() | 1n;
      const range = { low, high, token };
      s.max = high;
      s.issued.push(range);
      s.live = range;
      s.floor = low - 1n;
      const now = Date.now();
      return {
        low: low.toString(),
        high: high.toString(),
        node_tag: d.tag,
        range_at: { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1e6 },
        range_token: token.toString(),
      };
    },
    judge(item) {
      if (BigInt(item.last) > BigInt(item.end)) return { code: StatusCode.INVALID_ARGUMENT, message: 'last > end' };
      if (item.range_token === '0') return { code: StatusCode.FAILED_PRECONDITION, message: 'no range token' };
      const s = state(item.collection);
      const end = BigInt(item.end), last = BigInt(item.last), token = BigInt(item.range_token);
      const ok = (item.node_tag === '' || item.node_tag === d.tag) && s.live !== null && s.live.token === token &&
        s.max === end && s.floor <= last;
      if (!ok) return { code: 0, message: '', applied: false, max: s.max.toString() };
      const returned = s.live;
      s.max = last;
      s.live = null;
      if (last === returned.low - 1n) {
        const i = s.issued.indexOf(returned);
        const prev = i > 0 ? s.issued[i - 1] : null;
        if (prev && prev.high + 1n === returned.low) {
          s.live = prev;
          s.floor = prev.low - 1n;
        }
      }
      if (s.live === null) s.floor = last;
      return { code: 0, message: '', applied: true, max: s.max.toString() };
    },
  };
  d.rules = rules;
  const server = new grpc.Server();
  const wait = async () => {
    while (d.gate) await d.gate;
  };
  server.addService(proto.hiloServiceDefinition(), {
    async NextRange(c, cb) {
      d.requests.push(c.request);
      await wait();
      try {
        const hooked = d.nextRangeHook ? await d.nextRangeHook(c.request, rules) : undefined;
        if (hooked instanceof Error) return cb(hooked);
        cb(null, hooked ?? rules.issue(c.request));
      } catch (e) {
        cb(e);
      }
    },
    async ReturnRanges(c, cb) {
      const items = c.request.returns;
      d.returnCalls.push({ items, single: false });
      await wait();
      if (items.length > 1000) {
        return cb({ code: grpc.status.INVALID_ARGUMENT, details: `${items.length} returns; at most 1000 per call` });
      }
      if (d.returnsMode === 'unimplemented') return cb({ code: grpc.status.UNIMPLEMENTED, details: 'no ReturnRanges here' });
      if (d.returnsError !== null) return cb(d.returnsError);
      if (d.failReturns > 0) {
        d.failReturns--;
        return cb({ code: grpc.status.UNAVAILABLE, details: 'scripted outage' });
      }
      cb(null, { results: items.map((i) => ({ applied: false, max: '0', message: '', ...rules.judge(i) })) });
    },
    async ReturnRange(c, cb) {
      d.returnCalls.push({ items: [c.request], single: true });
      await wait();
      const r = rules.judge(c.request);
      if (r.code !== 0) return cb({ code: r.code, details: r.message });
      cb(null, { applied: r.applied, max: r.max });
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  d.target = `127.0.0.1:${port}`;
  d.stop = () => new Promise((r) => server.tryShutdown(() => r()));
  d.kill = () => server.forceShutdown();
  return d;
}

/** Lets I/O callbacks run (a few macrotask turns), without a fixed sleep. */
export async function settle(turns = 5) {
  for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
}

/** Waits until `predicate()` holds, polling between I/O turns, at most `ms`. */
export async function until(predicate, ms, what) {
  const end = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`${what}: not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
