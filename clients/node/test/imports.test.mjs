// The package's modules import one another without a circle (issue 35): a
// collection's cache gets its ranges through RangeSource and never reaches
// back into the client that owns it. Read from src/*.ts, type-only imports
// included (a circle of types is still two files that must change together).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

/** Each module's local imports: file name -> names of the files it imports. */
export function importGraph(dir) {
  const graph = new Map();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    const text = readFileSync(join(dir, file), 'utf8');
    const deps = new Set();
    for (const m of text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+'\.\/([^']+)\.js'/gms)) deps.add(`${m[1]}.ts`);
    for (const m of text.matchAll(/\bimport\(\s*'\.\/([^']+)\.js'\s*\)/g)) deps.add(`${m[1]}.ts`);
    graph.set(file, [...deps]);
  }
  return graph;
}

/** The first circle found, as a list of files (first = last), or null. */
export function findCircle(graph) {
  const state = new Map(); // file -> 'open' while on the path, 'done' after
  const path = [];
  const visit = (file) => {
    if (state.get(file) === 'done') return null;
    if (state.get(file) === 'open') return [...path.slice(path.indexOf(file)), file];
    state.set(file, 'open');
    path.push(file);
    for (const dep of graph.get(file) ?? []) {
      const circle = visit(dep);
      if (circle !== null) return circle;
    }
    path.pop();
    state.set(file, 'done');
    return null;
  };
  for (const file of graph.keys()) {
    const circle = visit(file);
    if (circle !== null) return circle;
  }
  return null;
}

test('the check finds a planted circle, type-only imports included', () => {
  const graph = new Map([
    ['client.ts', ['range_cache.ts']],
    ['range_cache.ts', ['range.ts']],
    ['range.ts', ['client.ts']],
  ]);
  assert.deepEqual(findCircle(graph), ['client.ts', 'range_cache.ts', 'range.ts', 'client.ts']);
  graph.set('range.ts', []);
  assert.equal(findCircle(graph), null);
});

test('src/*.ts import one another without a circle', () => {
  const graph = importGraph(SRC);
  assert.ok(graph.get('client.ts').includes('range_cache.ts'), 'the import reader found no imports');
  assert.ok(graph.get('range_cache.ts').includes('source.ts'), 'type-only imports were not read');
  const circle = findCircle(graph);
  assert.equal(circle, null, `import circle: ${circle?.join(' -> ')}`);
});
