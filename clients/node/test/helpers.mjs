// What the tests share: the package under test (built by build.sh into
// HILO_NODE_PKG), real hilo_server processes (HILO_SERVER_BIN) on port 0 with
// temporary databases, and an in-process hook layer in front of one.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
 * A real hilo_server (startServer) behind an in-process gRPC layer that
 * forwards every call to it, so every rule the client meets is the server's
 * own: the layer keeps none (it used to keep a copy of the server's rules
 * for ranges and returns, about 100 lines that had to follow every change
 * of the server). `size` fixes every range's size (the server's
 * --min_range_size and --max_range_size); `args` are more server flags.
 *
 * Kept only for what neither the real server nor the conformance suite's
 * proxy (clients/conformance/proxy.py) can do, which these tests need:
 * `nextRangeHook(request, rules)` may answer instead of the server (an
 * Error fails the call; `await rules.issue(request)` is the server's own
 * answer, to alter); `gate` (hold()) holds every call until opened;
 * `returnsMode` = 'unimplemented' answers ReturnRanges with UNIMPLEMENTED
 * as a node older than ReturnRanges does; `failReturns` = n fails the next
 * n ReturnRanges calls with UNAVAILABLE; `returnsError` = { code, details }
 * fails every ReturnRanges call with that status; every request is
 * recorded. What the real server plus the proxy can show is a conformance
 * scenario, not a test here.
 */
export async function startDouble({ tag = 'A', size, args = [] } = {}) {
  const sizes = size === undefined ? [] : [`--min_range_size=${size}`, `--max_range_size=${size}`];
  const node = await startServer({ tag, args: [...sizes, ...args] });
  const stub = rawStub(node.target);
  const forward = (method, request, c) =>
    new Promise((resolve, reject) => {
      const deadline = c?.getDeadline?.();
      const options = { deadline: deadline instanceof Date || typeof deadline === 'number' ? deadline : Date.now() + 5000 };
      stub[method](request, options, (e, r) => (e ? reject(e) : resolve(r)));
    });
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
    /** The server's Max of `collection`: the low - 1 of a range it issues now (call it last). */
    async max(collection) {
      const r = await call(stub, 'NextRange', { collection, last_size: '0', last_max: '0' });
      return BigInt(r.low) - 1n;
    },
  };
  const rules = { issue: (request) => forward('NextRange', request) };
  d.rules = rules;
  const server = new grpc.Server();
  const wait = async () => {
    while (d.gate) await d.gate;
  };
  const answer = (promise, cb) => promise.then((r) => cb(null, r), (e) => cb(e));
  server.addService(proto.hiloServiceDefinition(), {
    async NextRange(c, cb) {
      d.requests.push(c.request);
      await wait();
      try {
        const hooked = d.nextRangeHook ? await d.nextRangeHook(c.request, rules) : undefined;
        if (hooked instanceof Error) return cb(hooked);
        cb(null, hooked ?? (await forward('NextRange', c.request, c)));
      } catch (e) {
        cb(e);
      }
    },
    async ReturnRanges(c, cb) {
      d.returnCalls.push({ items: c.request.returns, single: false });
      await wait();
      if (d.returnsMode === 'unimplemented') return cb({ code: grpc.status.UNIMPLEMENTED, details: 'no ReturnRanges here' });
      if (d.returnsError !== null) return cb(d.returnsError);
      if (d.failReturns > 0) {
        d.failReturns--;
        return cb({ code: grpc.status.UNAVAILABLE, details: 'scripted outage' });
      }
      answer(forward('ReturnRanges', c.request, c), cb);
    },
    async ReturnRange(c, cb) {
      d.returnCalls.push({ items: [c.request], single: true });
      await wait();
      answer(forward('ReturnRange', c.request, c), cb);
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  d.target = `127.0.0.1:${port}`;
  d.stop = async () => {
    await new Promise((r) => server.tryShutdown(() => r()));
    stub.close();
    await node.stop();
  };
  d.kill = async () => {
    server.forceShutdown();
    stub.close();
    await node.stop();
  };
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
