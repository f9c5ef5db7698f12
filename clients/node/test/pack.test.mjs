// The `npm pack` tarball, installed OFFLINE (from the tarball and npm's
// cache, which npm ci filled) into an empty project outside the tree, used
// against a live hilo_server as an ES module, as CommonJS, and type-checked
// from TypeScript.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './helpers.mjs';

const OUT = process.env.HILO_NODE_OUT;
const HERE = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'hilo-node-pack-'));
let server;
after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function run(cmd, args) {
  try {
    return execFileSync(cmd, args, { cwd: dir, encoding: 'utf8', timeout: 60000 });
  } catch (e) {
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

test('the packed tarball installs offline in an empty project and works as ESM, CJS and from TypeScript', async () => {
  const tarball = readdirSync(OUT).find((f) => /^hilo-client-.*\.tgz$/.test(f));
  assert.ok(tarball, `no hilo-client-*.tgz in ${OUT}`);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'outside', version: '1.0.0', private: true }));
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', join(OUT, tarball)]);

  server = await startServer();
  writeFileSync(
    join(dir, 'esm.mjs'),
    `import { HiloClient, HiloError } from 'hilo-client';
const ids = new HiloClient({ targets: [process.argv[2]] });
const id = await ids.nextId('pack');
console.log(await ids.nextDocumentId('pack'), typeof id.number, HiloError.name);
await ids.close();
`,
  );
  writeFileSync(
    join(dir, 'cjs.cjs'),
    `const { HiloClient, HiloError } = require('hilo-client');
(async () => {
  const ids = new HiloClient({ targets: [process.argv[2]] });
  const id = await ids.nextId('pack');
  console.log(await ids.nextDocumentId('pack'), typeof id.number, HiloError.name);
  await ids.close();
})();
`,
  );
  assert.equal(run('node', ['esm.mjs', server.target]).trim(), 'pack/2-A bigint HiloError');
  // The ESM client closed and returned its tail: CJS continues right after.
  assert.equal(run('node', ['cjs.cjs', server.target]).trim(), 'pack/4-A bigint HiloError');

  // The shipped declarations, as a TypeScript user sees them (ESM and CJS resolution).
  writeFileSync(
    join(dir, 'use.mts'),
    `import { HiloClient, type HiloId } from 'hilo-client';
const ids = new HiloClient({ targets: ['127.0.0.1:1'], prefetchAt: 0.5 });
const id: Promise<HiloId> = ids.nextId('x');
const n: bigint = (undefined as unknown as HiloId).number;
// @ts-expect-error: a number is not a bigint
const wrong: number = (undefined as unknown as HiloId).number;
export { id, n, wrong };
`,
  );
  writeFileSync(join(dir, 'use.cts'), `import hilo = require('hilo-client');\nexport const s: hilo.HiloStats | undefined = undefined;\n`);
  const tsc = join(HERE, '..', 'node_modules', '.bin', 'tsc');
  run(tsc, ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--skipLibCheck', 'use.mts', 'use.cts']);
});
