// Breaks the client (src/*.ts) one rule at a time and checks that the tests notice:
// each mutant below is a rule of the contract (or a mistake RavenDB's HiLo
// generators made) put wrong on purpose, built from a copy of src/ (the tree
// is never touched) and run against every test/*.test.mjs. A mutant no test
// fails is reported as SURVIVED and the exit status is 1. Takes a few
// minutes; not part of the CTest run.
//
//   node clients/node/scripts/mutants.mjs SERVER_BIN WORK_DIR [NAME...]
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, readdirSync, writeFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const [serverBin, workArg, ...only] = process.argv.slice(2);
if (!serverBin || !workArg) {
  process.stderr.write('usage: mutants.mjs SERVER_BIN WORK_DIR [NAME...]\n');
  process.exit(2);
}
const work = resolve(workArg);

// [name, text in src/*.ts (exactly once, in one file), replacement]
const MUTANTS = [
  ["tag check off", "!NODE_TAG.test(r.node_tag)", "false"],
  ["low<1 allowed", "if (low < 1n || high < low)", "if (high < low)"],
  ["overlap check off", "if (l <= high && low <= h) {", "if (false) {"],
  ["no single flight", "if (this.inflight === null) this.startFetch(false);", "this.startFetch(false);"],
  ["failed refill kept", "      } finally {\n        this.inflight = null;\n      }", "      } finally {\n        if (!prefetch) {} else this.inflight = null;\n      }"],
  ["pair order tail first", "if (!cur.dry()) unused.returns.push(", "if (!cur.dry()) unused.returns.unshift("],
  ["recheck reads counter", "      const id = take(c);\n      if (id !== undefined) return id;", "      const r = c.cur;\n      if (r !== null && !r.dry()) return ((take as unknown) === takeId ? { number: BigInt(r.next), tag: r.tag } : c.prefix + r.next + r.suffix) as unknown as T;\n      const id = take(c);\n      if (id !== undefined) return id;"],
  ["client current tag", "this.prefix + this.take(r) + r.suffix", "this.prefix + this.take(r) + (this.ahead ?? r).suffix"],
  ["close does not wait", "    await Promise.all(sends);\n", ""],
  ["digit separator ok", "if (separator >= '0' && separator <= '9')", "if (false)"],
  ["dash separator ok", "if (separator === '-') {", "if (false) {"],
  ["last_max not reported", "rangeAt: issued.rangeAt, max: high };", "rangeAt: issued.rangeAt, max: this.previous.max };"],
  ["no sticky preferred", "this.preferred = index;", ""],
  ["no return retry", "const RETURN_ATTEMPTS = 3;", "const RETURN_ATTEMPTS = 1;"],
  ["no UNIMPLEMENTED fallback", "if (err.code !== StatusCode.UNIMPLEMENTED) return", "if (true) return"],
  ["range used after return", "this.retireCurrent();\n      if (!cur.dry())", "if (!cur.dry())"],
  ["past high", "if (r !== null && !r.dry()) return r;", "if (r !== null && (r.small ? r.next <= r.last + 1 : !r.dry())) return r;"],
  ["numbers always JS numbers", "this.small = high <= MAX_SAFE;", "this.small = true;"],
  ["signal ignored", "    signal.addEventListener('abort', onAbort, { once: true });", ""],
  ["no waiter bound", "    if (now - started > bound) {", "    if (false) {"],
  ["no batching", "const MAX_BATCH_ITEMS = 1000;\nconst MAX_BATCH_BYTES = 60 * 1024;", "const MAX_BATCH_ITEMS = 1e9;\nconst MAX_BATCH_BYTES = 1e12;"],
  ["no prefetch", "    if (this.inflight !== null || this.ahead !== null || this.closed) return;", "    return;"],
  ["whole return last=low", "last: ahead.low - 1n }", "last: ahead.low }"],
  ["held kept after a return", "this.held.remove(range.tag, last + 1n, range.high);", ""],
  ["callers served during a return", "this.inflight = new Promise<void>((resolve) => (this.endInflight = resolve));", ""],
  ["refused collection kept", "    if (this.counters.ranges_fetched !== 0 || this.inflight !== null || this.closed) return false;", "    return false;"],
  ["forgotten after a range", "    if (this.counters.ranges_fetched !== 0 || this.inflight !== null || this.closed) return false;\n    if (this.cur !== null || this.ahead !== null) return false; // held no range: unreachable", "    if (this.inflight !== null || this.closed) return false;"],
  ["forgotten counters lost", "    for (const [key, n] of Object.entries(c.counters)) this.dropped[key as keyof CacheCounters] += n;\n    for (const [code, n] of c.errors) this.droppedErrors.set(code, (this.droppedErrors.get(code) ?? 0) + n);", ""],
  ["forgotten counters moved twice", "    if (this.caches.get(c.name) !== c) return;\n    this.caches.delete(c.name);\n    this.handles.delete(c.name);", "    if (this.caches.get(c.name) === c) {\n      this.caches.delete(c.name);\n      this.handles.delete(c.name);\n    }"],
  ["forgotten cache fails the call", "        c = c.successor();", "        throw new HiloError(StatusCode.FAILED_PRECONDITION, `\"${c.name}\" was forgotten`);"],
  ["forgotten cache counts a wait", "    if (this.forgotten) throw FORGOTTEN;\n    // A call the closed client", "    if (this.forgotten) { this.counters.calls_waited++; throw FORGOTTEN; }\n    // A call the closed client"],
  ["closed client counts a wait", "    if (this.closed) {\n      throw new HiloError(StatusCode.FAILED_PRECONDITION, `client is closed; no more IDs of ${quoteName(this.name)}`);\n    }\n", "    if (this.closed) {\n      if (!counted) this.counters.calls_waited++;\n      throw new HiloError(StatusCode.FAILED_PRECONDITION, `client is closed; no more IDs of ${quoteName(this.name)}`);\n    }\n"],
  ["handle left on a forgotten cache", "return c.forgotten ? (this.cache = this.table.bind(this, c)) : c;", "return c.forgotten ? this.table.bind(this, c) : c;"],
  ["handle's miss not looked up again", "return this.cache.tryId() ?? this.found().tryId();", "return this.cache.tryId();"],
  ["handle's document-ID miss not looked up again", "return this.cache.tryDocumentId() ?? this.found().tryDocumentId();", "return this.cache.tryDocumentId();"],
  ["handle made eagerly", "    const c = this.caches.get(name);\n    if (c === undefined) return new CollectionHandle(name, this.table, this.placeholder);", "    const c = this.cache(name);"],
  ["handle's first call keeps no cache", "const c = make ? this.cache(h.name) : this.caches.get(h.name);", "const c = make ? new RangeCache(h.name, this.separator, this.context) : this.caches.get(h.name);"],
  ["handle on a cache of its own", "return new CollectionHandle(name, this.table, this.placeholder);", "return new CollectionHandle(name, this.table, new RangeCache(name, this.separator, this.context));"],
  ["handle's miss makes a cache", "find: (h, was) => this.bind(h, was, false),", "find: (h, was) => this.bind(h, was, true),"],
  ["whole long name quoted", "  if (name.length <= WHOLE_NAME_CHARS) return JSON.stringify(name);", "  return JSON.stringify(name);"],
  ["name quoted raw", "  if (name.length <= WHOLE_NAME_CHARS) return JSON.stringify(name);", "  if (name.length <= WHOLE_NAME_CHARS) return `\"${name}\"`;"],
  ["aborted callers' collection kept", "p.catch(() => this.forgetAfterFailure());", "p.catch(() => {});"],
  ["last_max kept after a return", "this.previous = { ...this.previous, max: this.used.get(range.tag) ?? 0n };", ""],
];

const sources = readdirSync(join(DIR, 'src'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => [f, readFileSync(join(DIR, 'src', f), 'utf8')]);
// Every test file, as scripts/test.sh runs them (held.test.mjs alone
// checks R11's overlap rule in isolation, for one).
const tests = readdirSync(join(DIR, 'test'))
  .filter((f) => f.endsWith('.test.mjs'))
  .map((f) => join(DIR, 'test', f));
let survived = 0;
for (const [name, from, to] of MUTANTS) {
  if (only.length > 0 && !only.includes(name)) continue;
  const holders = sources.filter(([, text]) => text.includes(from));
  const count = holders.reduce((n, [, text]) => n + text.split(from).length - 1, 0);
  if (count !== 1) throw new Error(`mutant "${name}": its text is in src/*.ts ${count} times; it must be there exactly once`);
  const [file, original] = holders[0];
  const src = join(work, 'src');
  rmSync(src, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  cpSync(join(DIR, 'src'), src, { recursive: true });
  writeFileSync(join(src, file), original.replace(from, to));
  const out = join(work, 'out');
  const build = spawnSync(join(DIR, 'build.sh'), [out], { encoding: 'utf8', env: { ...process.env, HILO_NODE_SRC: src } });
  if (build.status !== 0) {
    console.log(`${name}: does not build (${build.stderr.trim().split('\n').pop()})`);
    continue;
  }
  const run = spawnSync(
    'node',
    ['--test', '--test-concurrency=1', '--test-timeout=30000', ...tests],
    {
      encoding: 'utf8',
      timeout: 600000,
      maxBuffer: 1 << 28,
      env: { ...process.env, HILO_SERVER_BIN: serverBin, HILO_NODE_PKG: join(out, 'package'), HILO_NODE_OUT: out },
    },
  );
  const failing = [...run.stdout.matchAll(/^not ok \d+ - (.*)$/gm)].map((m) => m[1]).filter((t) => !t.startsWith('/'));
  if (failing.length === 0) survived++;
  console.log(`${name}: ${failing.length === 0 ? 'SURVIVED' : `${failing.length} failing: ${failing.join(' | ')}`}`);
}
process.exit(survived === 0 ? 0 : 1);
