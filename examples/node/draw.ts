// Draws document IDs from hilo with the Node client, for scripts/hilo-draw:
//
//   node BUILD/examples/draw.js --targets=HOST:PORT[,HOST:PORT...] \
//       --collection=NAME --threads=N --seconds=S
//
// N concurrent async callers take document IDs of NAME for S seconds and
// print each on its own line to stdout; they keep drawing through
// UNAVAILABLE and DEADLINE_EXCEEDED (a node down). Then the client closes,
// handing its unused numbers back, and the program exits 0. Any other error:
// one line on stderr naming it, exit 1. Built by clients/node/build.sh
// OUT_DIR into OUT_DIR/examples/draw.js.
import { HiloClient, HiloError } from 'hilo-client';

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
        if (e instanceof HiloError && (e.codeName === 'UNAVAILABLE' || e.codeName === 'DEADLINE_EXCEEDED')) {
          await new Promise((r) => setTimeout(r, 5)); // a node is down: try again shortly
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
  await client.close();
  if (fatal !== null) throw fatal;
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    const text = e instanceof HiloError ? `${e.codeName}: ${e.message}` : e instanceof Error ? e.message : String(e);
    process.stderr.write(`draw: ${text.replace(/\n/g, ' ')}\n`);
    process.exit(1);
  },
);
