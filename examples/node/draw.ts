// Draws document IDs from hilo with the Node client, for scripts/hilo-draw:
//
//   node BUILD/examples/draw.js --targets=HOST:PORT[,HOST:PORT...] \
//       --collection=NAME --threads=N --seconds=S
//
// N concurrent async callers take document IDs of NAME for S seconds and
// print each on its own line to stdout. UNAVAILABLE (no target answered: a
// node down) is waited out: the caller tries again until S is over (issue 26
// section 3). Any other error while drawing stops the draw: the client
// closes, one line on stderr names the error, exit 1. Otherwise the client
// closes, handing its unused numbers back, and the program exits 0, unless a
// return failed for a reason other than its node being down (UNAVAILABLE, or
// DEADLINE_EXCEEDED: killed, stopped or restarting; numbers a down node does
// not get back are only skipped): then a line on stderr names it, exit 1.
// Every line printed reaches stdout before the exit (exitWhenWritten).
// Built by clients/node/build.sh OUT_DIR into OUT_DIR/examples/draw.js.
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { HiloClient, HiloError } from 'hilo-client';

/** Whether a caller waits an error out and draws on: only UNAVAILABLE, every target down for a moment. */
export function waitedOut(e: unknown): boolean {
  return e instanceof HiloError && e.codeName === 'UNAVAILABLE';
}

/**
 * What failed during close(), from the client's error counts (by code name)
 * before and after it: null when every failure was a node being down
 * (UNAVAILABLE, DEADLINE_EXCEEDED), else the others, counted by code.
 */
export function closeFailures(before: Record<string, number>, after: Record<string, number>): string | null {
  const other = Object.keys(after)
    .filter((code) => code !== 'UNAVAILABLE' && code !== 'DEADLINE_EXCEEDED')
    .filter((code) => after[code] - (before[code] ?? 0) > 0)
    .sort()
    .map((code) => `${after[code] - (before[code] ?? 0)} ${code}`);
  return other.length === 0 ? null : `handing unused numbers back failed for a reason other than a node being down: ${other.join(', ')}`;
}

/**
 * Exits with `code` once every write made to `streams` so far has reached
 * its file, pipe or terminal. A write to a pipe is asynchronous on POSIX,
 * and process.exit drops the ones still queued: with stdout a pipe its
 * reader was slow to empty, the last IDs printed (or the error line on
 * stderr) were lost, though their numbers were used. So a write that
 * failed (the reader gone: EPIPE), or writes still queued after `boundMs`
 * (a reader that stopped reading), end the program with 1, not 0: what it
 * drew may not have reached its reader.
 */
export function exitWhenWritten(
  code: number,
  streams: NodeJS.WritableStream[] = [process.stdout, process.stderr],
  exit: (code: number) => void = (c) => process.exit(c),
  boundMs = 10_000,
  setTimer: (fire: () => void, ms: number) => unknown = setTimeout,
): void {
  const failedCode = code === 0 ? 1 : code;
  let left = streams.length;
  let failed = false;
  let exited = false;
  const end = (c: number) => {
    if (!exited) {
      exited = true;
      exit(c);
    }
  };
  // Each stream calls a write back in order, after every write before it.
  const done = (err?: Error | null) => {
    if (err) failed = true;
    if (--left === 0) end(failed ? failedCode : code);
  };
  for (const s of streams) s.write('', done);
  if (!exited) setTimer(() => end(failedCode), boundMs);
}

function flag(name: string, fallback?: string): string {
  const prefix = `--${name}=`;
  const arg = process.argv.slice(2).find((a) => a.startsWith(prefix));
  if (arg !== undefined) return arg.slice(prefix.length);
  if (fallback !== undefined) return fallback;
  throw new Error(`missing --${name}=...`);
}

function positive(name: string, text: string): number {
  const n = Number(text);
  if (!(Number.isFinite(n) && n > 0)) throw new Error(`--${name}=${text} is not a positive number`);
  return n;
}

async function main(): Promise<void> {
  const targets = flag('targets', '127.0.0.1:50051').split(',').filter((t) => t !== '');
  const collection = flag('collection');
  const callers = Math.floor(positive('threads', flag('threads', '1')));
  const seconds = positive('seconds', flag('seconds'));
  const client = new HiloClient({ targets });
  const handle = client.collection(collection);
  const end = performance.now() + seconds * 1000;
  let out: string[] = [];
  let fatal: unknown = null;

  // stdout in chunks, waiting for the pipe to drain: nothing is lost or left unbounded.
  async function flush(): Promise<void> {
    if (out.length === 0) return;
    const chunk = out.join('\n') + '\n';
    out = [];
    if (!process.stdout.write(chunk)) {
      await new Promise<void>((resolve) => process.stdout.once('drain', resolve));
    }
  }

  async function caller(): Promise<void> {
    for (let i = 0; fatal === null && performance.now() < end; i++) {
      try {
        out.push(await handle.nextDocumentId());
      } catch (e) {
        if (waitedOut(e)) {
          await new Promise((r) => setTimeout(r, 5)); // every target down: try again shortly
          continue;
        }
        fatal = e;
        return;
      }
      // A cached range never yields to I/O: let prefetches, timers and stdout run.
      if (i % 256 === 255) {
        if (out.length >= 4096) await flush();
        else await new Promise((r) => setImmediate(r));
      }
    }
  }

  await Promise.all(Array.from({ length: callers }, caller));
  await flush();
  const before = client.stats().errors;
  await client.close();
  if (fatal !== null) throw fatal;
  const failed = closeFailures(before, client.stats().errors);
  if (failed !== null) throw new Error(failed);
}

// Run as a program (not when a test imports waitedOut and closeFailures).
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  main().then(
    () => exitWhenWritten(0),
    (e: unknown) => {
      const text = e instanceof HiloError ? `${e.codeName}: ${e.message}` : e instanceof Error ? e.message : String(e);
      process.stderr.write(`draw: ${text.replace(/\n/g, ' ')}\n`);
      exitWhenWritten(1);
    },
  );
}
