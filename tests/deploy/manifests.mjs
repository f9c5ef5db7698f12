// Offline checks of hilo's rendered Kubernetes manifests (deploy/k8s).
//
//   node manifests.mjs validate --src SRC --variant VARIANT [--base BASE] FILE
//       VARIANT is base, prometheus-operator (a StatefulSet with a volume per
//       pod) or postgresql (a Deployment on a shared database; with --base,
//       the rendered base, its pod must otherwise equal the StatefulSet's).
//       Every object must (1) pass the JSON-schema validation of the
//       Kubernetes API models (npm kubernetes-models, and
//       @kubernetes-models/prometheus-operator for ServiceMonitor and
//       PrometheusRule), (2) type-check as an object literal against the
//       same models' TypeScript interfaces, which rejects any field the API
//       does not know (the JSON schemas allow unknown fields), and (3) pass
//       the checks below of what a schema cannot see: probes on the gRPC
//       port, the volume under --db (or the Secret under --store_file), the
//       image tag, the security context, the drain timing, the
//       PrometheusRule being deploy/monitoring/hilo-rules.yaml, and so on.
//   node manifests.mjs pod-spec FILE
//       Prints, as JSON, what a test needs to start the server exactly as the
//       StatefulSet does: command, args, ports, the data mount.
//
// The npm packages come from tests/deploy/package.json (scripts/install-
// deps-deploy.sh installs them into tests/deploy/node_modules).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

function usage(message) {
  console.error(`manifests.mjs: ${message}`);
  process.exit(2);
}

const argv = process.argv.slice(2);
const command = argv.shift();
const options = {};
const files = [];
while (argv.length > 0) {
  const arg = argv.shift();
  if (arg.startsWith('--')) options[arg.slice(2)] = argv.shift();
  else files.push(arg);
}
if (files.length !== 1) usage('expected exactly one rendered YAML file');
const src = path.resolve(options.src ?? path.join(path.dirname(new URL(import.meta.url).pathname), '../..'));
const modulesDir = path.join(src, 'tests', 'deploy', 'node_modules');
if (!fs.existsSync(path.join(modulesDir, 'kubernetes-models'))) {
  console.error(`manifests.mjs: ${modulesDir} lacks kubernetes-models: run scripts/install-deps-deploy.sh`);
  process.exit(1);
}
const YAML = createRequire(path.join(src, 'tests', 'deploy', 'package.json'))('yaml');

const text = fs.readFileSync(files[0], 'utf8');
const objects = YAML.parseAllDocuments(text).map((doc) => {
  if (doc.errors.length > 0) usage(`${files[0]}: ${doc.errors[0].message}`);
  return doc.toJS();
}).filter((o) => o !== null);

// ---------------------------------------------------------------- helpers
const failures = [];
let passed = 0;
function check(condition, what) {
  if (condition) passed += 1;
  else failures.push(what);
  return condition;
}
function isSubset(small, big) {
  return small && big && Object.keys(small).length > 0 &&
    Object.entries(small).every(([k, v]) => big[k] === v);
}
function parseFlags(args) {
  const flags = new Map();
  for (const arg of args) {
    const m = /^--([a-z_]+)(?:=(.*))?$/.exec(arg);
    if (!m) { failures.push(`argument "${arg}" is not a --flag`); continue; }
    if (flags.has(m[1])) failures.push(`flag --${m[1]} given twice`);
    flags.set(m[1], m[2] ?? 'true');
  }
  return flags;
}
// JSON with every object's keys sorted: equal for equal data, whatever
// order a renderer wrote the keys in.
function canonical(value) {
  return JSON.stringify(value, (key, v) => (v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : v));
}
function hostPort(value) {
  const m = /^(.*):(\d+)$/.exec(value ?? '');
  return m ? { host: m[1], port: Number(m[2]) } : null;
}
// absl durations as used here: e.g. 20s, 1m30s, 500ms.
function durationSeconds(value) {
  const re = /(\d+(?:\.\d+)?)(h|ms|m|s)/g;
  let total = 0;
  let consumed = '';
  for (const m of (value ?? '').matchAll(re)) {
    total += Number(m[1]) * { h: 3600, m: 60, s: 1, ms: 0.001 }[m[2]];
    consumed += m[0];
  }
  return consumed.length > 0 && consumed === value ? total : NaN;
}
function quantity(value) {
  const m = /^(\d+(?:\.\d+)?)(m|k|M|G|Ki|Mi|Gi|Ti)?$/.exec(String(value ?? ''));
  if (!m) return NaN;
  const scale = { undefined: 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4 };
  return Number(m[1]) * scale[m[2]];
}
function projectVersion() {
  const cmake = fs.readFileSync(path.join(src, 'CMakeLists.txt'), 'utf8');
  return /project\(hilo VERSION ([0-9.]+)/.exec(cmake)?.[1];
}
function containerfile() {
  const text = fs.readFileSync(path.join(src, 'deploy', 'Containerfile'), 'utf8');
  const user = /^USER\s+(\d+)(?::(\d+))?\s*$/m.exec(text);
  const entrypoint = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(text);
  return {
    uid: user ? Number(user[1]) : NaN,
    gid: user?.[2] ? Number(user[2]) : NaN,
    entrypoint: entrypoint ? JSON.parse(entrypoint[1]) : [],
  };
}
// The one workload of `kind` (StatefulSet or Deployment) among `from` and its
// container "hilo"; exits if there is not exactly one.
function findWorkload(kind, from = objects) {
  const sets = from.filter((o) => o.kind === kind);
  if (sets.length !== 1) {
    console.error(`manifests.mjs: expected one ${kind}, found ${sets.length}`);
    process.exit(1);
  }
  const sts = sets[0];
  const container = (sts.spec?.template?.spec?.containers ?? []).find((c) => c.name === 'hilo');
  if (!container) {
    console.error(`manifests.mjs: the ${kind} has no container named "hilo"`);
    process.exit(1);
  }
  return { sts, container };
}
function findStatefulSet() { return findWorkload('StatefulSet'); }
// The mount that holds `file`: the deepest volumeMount whose path contains it.
function mountFor(container, file) {
  return (container.volumeMounts ?? [])
    .filter((m) => file.startsWith(m.mountPath.replace(/\/$/, '') + '/'))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
}

// ---------------------------------------------------------------- pod-spec
if (command === 'pod-spec') {
  const { sts, container } = findStatefulSet();
  const flags = parseFlags(container.args ?? []);
  const db = flags.get('db');
  const annotations = sts.spec.template.metadata?.annotations ?? {};
  console.log(JSON.stringify({
    name: sts.metadata.name,
    command: container.command ?? [],
    args: container.args ?? [],
    db,
    dataMount: db ? mountFor(container, db)?.mountPath ?? null : null,
    grpcPort: hostPort(flags.get('listen'))?.port ?? null,
    readinessProbePort: container.readinessProbe?.grpc?.port ?? null,
    metricsPort: Number(annotations['prometheus.io/port'] ?? NaN),
    metricsPath: annotations['prometheus.io/path'] ?? null,
    shutdownGraceSeconds: durationSeconds(flags.get('shutdown_grace')),
    runAsUser: container.securityContext?.runAsUser ?? sts.spec.template.spec.securityContext?.runAsUser ?? null,
    runAsGroup: container.securityContext?.runAsGroup ?? sts.spec.template.spec.securityContext?.runAsGroup ?? null,
    fsGroup: sts.spec.template.spec.securityContext?.fsGroup ?? null,
  }));
  process.exit(failures.length === 0 ? 0 : 1);
}
if (command !== 'validate') usage(`unknown command "${command}" (validate or pod-spec)`);
const variant = options.variant ?? 'base';
if (!['base', 'prometheus-operator', 'postgresql', 'authz'].includes(variant)) usage(`unknown --variant ${variant}`);
// The StatefulSet variants keep a SQLite database per pod; postgresql runs a
// Deployment of stateless servers on one shared database.
const shared = variant === 'postgresql';
// The name and key of the Secret holding the connection URI, as documented.
const secretName = 'hilo-postgresql';
const secretKey = 'uri';

// ------------------------------------------------- 1. JSON-schema validation
// The npm module of an apiVersion's models, e.g. kubernetes-models/apps/v1.
function modelModule(apiVersion) {
  if (apiVersion.startsWith('monitoring.coreos.com/')) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  }
  return `kubernetes-models/${apiVersion}`;
}
for (const [i, o] of objects.entries()) {
  const where = `object ${i} (${o?.kind ?? '?'} ${o?.metadata?.name ?? '?'})`;
  if (!check(typeof o?.apiVersion === 'string' && typeof o?.kind === 'string', `${where}: no apiVersion/kind`)) continue;
  // ESM-only packages whose exports name each group/version: resolve by hand.
  const file = path.join(modulesDir, modelModule(o.apiVersion), 'index.js');
  const model = fs.existsSync(file) ? (await import(pathToFileURL(file).href))[o.kind] : undefined;
  if (typeof model !== 'function') {
    failures.push(`${where}: no schema for ${o.apiVersion} ${o.kind}`);
    continue;
  }
  try {
    new model(o).validate();
    passed += 1;
  } catch (error) {
    failures.push(`${where}: schema: ${error.message}`);
  }
}

// ------------------------------- 2. strict type check: no unknown fields
{
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hilo-manifests-'));
  try {
    fs.symlinkSync(modulesDir, path.join(dir, 'node_modules'), 'dir');
    const lines = [];
    for (const [i, o] of objects.entries()) {
      const iface = `I${o.kind}`;
      lines.push(`import type { ${iface} as T${i} } from ${JSON.stringify(modelModule(o.apiVersion))};`);
      lines.push(`// ${o.kind} ${o.metadata?.name}`);
      lines.push(`export const object${i}: T${i} = ${JSON.stringify(o, null, 2)};`);
    }
    fs.writeFileSync(path.join(dir, 'rendered.ts'), lines.join('\n') + '\n');
    const tsc = path.join(modulesDir, 'typescript', 'bin', 'tsc');
    try {
      execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--skipLibCheck',
        '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
        path.join(dir, 'rendered.ts')], { cwd: dir, encoding: 'utf8', stdio: 'pipe' });
      passed += 1;
    } catch (error) {
      failures.push(`type check against the Kubernetes models failed (unknown or mistyped field):\n${(error.stdout || error.message).trim()}`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// ------------------------------------- 3. what the schemas cannot see
const workloadKind = shared ? 'Deployment' : 'StatefulSet';
const { sts, container } = findWorkload(workloadKind);
const podSpec = sts.spec.template.spec;
const podLabels = sts.spec.template.metadata?.labels ?? {};
const annotations = sts.spec.template.metadata?.annotations ?? {};
const services = objects.filter((o) => o.kind === 'Service');
const headless = services.find((s) => s.spec?.clusterIP === 'None');
const client = services.find((s) => s.spec?.clusterIP !== 'None');
const pdbs = objects.filter((o) => o.kind === 'PodDisruptionBudget');
const image = containerfile();
const version = projectVersion();

const expectedKinds = {
  base: ['NetworkPolicy', 'PodDisruptionBudget', 'Service', 'Service', 'StatefulSet'],
  'prometheus-operator': ['NetworkPolicy', 'PodDisruptionBudget', 'PrometheusRule', 'Service', 'Service', 'ServiceMonitor', 'StatefulSet'],
  // No StatefulSet, no PersistentVolumeClaim, and no Secret: the user creates
  // that, so no password is ever in the repository.
  postgresql: ['Deployment', 'NetworkPolicy', 'PodDisruptionBudget', 'Service', 'Service'],
  // The policy as a ConfigMap; the tokens' Secret is the user's.
  authz: ['ConfigMap', 'NetworkPolicy', 'PodDisruptionBudget', 'Service', 'Service', 'StatefulSet'],
}[variant];
check(JSON.stringify(objects.map((o) => o.kind).sort()) === JSON.stringify(expectedKinds),
  `objects are ${objects.map((o) => o.kind).sort()}, expected ${expectedKinds}`);
for (const o of objects) {
  check(o.metadata?.namespace === undefined,
    `${o.kind} ${o.metadata?.name} sets a namespace; the namespace is chosen at apply time (-n)`);
}

if (!shared) {
  // StatefulSet shape.
  check(sts.spec.replicas === 3, `replicas is ${sts.spec.replicas}, expected 3`);
  check(isSubset(sts.spec.selector?.matchLabels, podLabels), 'StatefulSet selector does not match its pod labels');
  check(headless !== undefined && sts.spec.serviceName === headless.metadata.name,
    `serviceName "${sts.spec.serviceName}" is not the headless Service`);
  check((sts.spec.ordinals?.start ?? 0) === 0, 'ordinals must start at 0 so that hilo-0 serves tag A');
  check(sts.spec.persistentVolumeClaimRetentionPolicy?.whenDeleted !== 'Delete' &&
    sts.spec.persistentVolumeClaimRetentionPolicy?.whenScaled !== 'Delete',
    'PVCs must be retained: a new empty database under an old tag would reissue IDs');
} else {
  // Deployment shape: stateless pods, nothing persistent anywhere.
  check(Number.isInteger(sts.spec.replicas) && sts.spec.replicas >= 2,
    `replicas is ${sts.spec.replicas}, expected at least 2 so that losing a pod leaves one serving`);
  check(isSubset(sts.spec.selector?.matchLabels, podLabels), 'Deployment selector does not match its pod labels');
  check(!objects.some((o) => o.kind === 'StatefulSet'), 'the StatefulSet of the base must be gone');
  check(!objects.some((o) => o.kind === 'PersistentVolumeClaim' || o.spec?.volumeClaimTemplates !== undefined),
    'no PersistentVolumeClaim or volumeClaimTemplates: the database holds all state');
  check(!(podSpec.volumes ?? []).some((v) => v.persistentVolumeClaim || v.ephemeral || v.hostPath),
    'the pod must mount no persistent, ephemeral-claim or host volume');
  check(sts.spec.strategy?.type !== 'Recreate', 'a Recreate strategy takes every pod down at once');
  check(!objects.some((o) => o.kind === 'Secret'), 'the Secret must not be part of the manifests (no password in the repository)');
  check(!/postgres(?:ql)?:\/\/[^\s'"@/]*:[^\s'"@/]*@/.test(text), 'the rendered manifests contain a connection URI with a password');
}
check(podSpec.containers.length === 1, 'expected one container per pod');

// Command and flags.
check(JSON.stringify(container.command) === JSON.stringify(image.entrypoint),
  `command ${JSON.stringify(container.command)} is not the image's entrypoint ${JSON.stringify(image.entrypoint)}`);
const flags = parseFlags(container.args ?? []);
const listen = hostPort(flags.get('listen'));
const metricsListen = hostPort(flags.get('metrics_listen'));
check(listen?.host === '0.0.0.0', `--listen=${flags.get('listen')} must bind 0.0.0.0 in a pod`);
check(metricsListen?.host === '0.0.0.0', `--metrics_listen=${flags.get('metrics_listen')} must bind 0.0.0.0 in a pod`);
check(!flags.has('node_tag'), '--node_tag must not be set: every pod would share it');
check(!flags.has('retag_database'),
  '--retag_database must not be set: re-tagging a database is a one-off step, and left in a manifest it would let a mixed-up volume start');
const db = flags.get('db') ?? '';
const storeFile = flags.get('store_file') ?? '';
if (!shared) {
  check(flags.get('node_tag_from_hostname') === 'true', '--node_tag_from_hostname must be set: each pod its own tag');
  check(flags.get('sync') === undefined || flags.get('sync') === 'full',
    '--sync must be full: a node that loses commits could reissue IDs');
  check(db.startsWith('/'), `--db=${db} must be an absolute path`);
  check(flags.get('create_db') === undefined || flags.get('create_db') === 'true',
    `--create_db=${flags.get('create_db')}: give it bare, or leave it out`);
  check(!flags.has('store') && !flags.has('store_file') && !flags.has('node_tag_hashed_from_hostname'),
    'a StatefulSet with a volume per pod takes no --store, --store_file or --node_tag_hashed_from_hostname');
} else {
  check(flags.get('node_tag_hashed_from_hostname') === 'true',
    '--node_tag_hashed_from_hostname must be set: a Deployment\'s pods have no ordinal');
  check(!flags.has('node_tag_from_hostname'),
    '--node_tag_from_hostname must not be set: a Deployment\'s pod names are not hilo-N');
  check(!flags.has('db'), `--db=${db} must not be set: the database is PostgreSQL (--store_file), not a file in the pod`);
  check(!flags.has('create_db'), '--create_db must not be set: it is for an SQLite file, and hilo_server refuses it with --store');
  check(!flags.has('sync'), '--sync is SQLite\'s; PostgreSQL commits are durable by hilo\'s synchronous_commit');
  check(!flags.has('store'), '--store must not be set: the URI and its password would show in the pod spec and ps');
  check(storeFile.startsWith('/'), `--store_file=${storeFile} must be an absolute path`);
}
const grace = durationSeconds(flags.get('shutdown_grace'));
check(Number.isFinite(grace) && grace > 0, `--shutdown_grace=${flags.get('shutdown_grace')} must be a positive duration`);

// Ports and probes.
const portByName = Object.fromEntries((container.ports ?? []).map((p) => [p.name, p.containerPort]));
check(listen && portByName.grpc === listen.port, `container port "grpc" ${portByName.grpc} is not the --listen port ${listen?.port}`);
check(metricsListen && portByName.metrics === metricsListen.port,
  `container port "metrics" ${portByName.metrics} is not the --metrics_listen port ${metricsListen?.port}`);
for (const name of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
  const probe = container[name];
  if (name === 'startupProbe' && probe === undefined) continue;
  if (!check(probe !== undefined, `${name} is missing`)) continue;
  if (shared && name === 'livenessProbe') {
    // Health turns NOT_SERVING while PostgreSQL is away; a liveness probe on
    // it would restart every pod during a database outage, into a crash loop
    // (the server exits at start without its database). Only the port.
    const port = probe.tcpSocket?.port;
    check(probe.tcpSocket !== undefined && !probe.grpc && !probe.httpGet && !probe.exec,
      'livenessProbe must be a tcpSocket probe: the gRPC health status follows the database');
    check(listen && (port === listen.port || port === 'grpc'), `livenessProbe asks port ${port}, not the gRPC port ${listen?.port}`);
    continue;
  }
  check(probe.grpc !== undefined && !probe.httpGet && !probe.tcpSocket && !probe.exec,
    `${name} must be a native gRPC probe`);
  check(listen && probe.grpc?.port === listen.port, `${name} asks port ${probe.grpc?.port}, not the gRPC port ${listen?.port}`);
  check((probe.grpc?.service ?? '') === '', `${name} must ask the server-wide health status (service "")`);
}

if (!shared) {
  // Storage: --db lies on the pod's own PersistentVolumeClaim.
  const mount = mountFor(container, db);
  const claim = (sts.spec.volumeClaimTemplates ?? []).find((t) => t.metadata?.name === mount?.name);
  check(mount !== undefined, `no volumeMount holds --db=${db}`);
  check(claim !== undefined, `the volume "${mount?.name}" mounted at ${mount?.mountPath} is not a volumeClaimTemplate`);
  check(!(podSpec.volumes ?? []).some((v) => v.name === mount?.name), `the data volume "${mount?.name}" is shadowed by a pod volume`);
  check(mount?.readOnly !== true, 'the data volume is mounted read-only');
  check(JSON.stringify(claim?.spec?.accessModes) === '["ReadWriteOnce"]' || JSON.stringify(claim?.spec?.accessModes) === '["ReadWriteOncePod"]',
    'the data claim must be ReadWriteOnce: one SQLite writer per volume');
  check(quantity(claim?.spec?.resources?.requests?.storage) > 0, 'the data claim requests no storage');
} else {
  // The URI: --store_file is the key "uri" of the Secret hilo-postgresql,
  // mounted read-only, readable by the pod's group (fsGroup).
  const mount = mountFor(container, storeFile);
  const volume = (podSpec.volumes ?? []).find((v) => v.name === mount?.name);
  const secret = volume?.secret;
  check(mount !== undefined, `no volumeMount holds --store_file=${storeFile}`);
  check(mount?.readOnly === true, `the volume "${mount?.name}" holding --store_file must be mounted readOnly`);
  check(mount?.subPath === undefined && mount?.subPathExpr === undefined,
    'mount the Secret as a folder, not by subPath (a subPath mount misses Secret updates)');
  check(secret !== undefined, `the volume "${mount?.name}" holding --store_file is not a Secret volume`);
  check(secret?.secretName === secretName, `the Secret is "${secret?.secretName}", documented as "${secretName}"`);
  check(secret?.optional !== true, 'the Secret must not be optional: without it the server cannot start');
  const relative = mount ? storeFile.slice(mount.mountPath.replace(/\/$/, '').length + 1) : '';
  const item = (secret?.items ?? []).find((i) => i.path === relative);
  check(secret?.items === undefined ? relative === secretKey : item?.key === secretKey,
    `--store_file=${storeFile} is not the Secret's key "${secretKey}"`);
  const mode = item?.mode ?? secret?.defaultMode ?? 0o644;
  check((mode & 0o004) !== 0 || ((mode & 0o040) !== 0 && podSpec.securityContext?.fsGroup === image.gid),
    `the URI file (mode ${mode.toString(8)}) must be readable by the pod's user`);
  check((mode & 0o222) === 0, `the URI file (mode ${mode.toString(8)}) must not be writable`);
  // The README's `kubectl create secret` must create this Secret and key.
  const readme = fs.readFileSync(path.join(src, 'deploy', 'README.md'), 'utf8');
  const documented = /kubectl create secret generic ([\w.-]+)[\s\\]+(?:-n \S+[\s\\]+)?--from-literal=([\w.-]+)=/.exec(readme);
  check(documented?.[1] === secretName && documented?.[2] === secretKey,
    `deploy/README.md must document \`kubectl create secret generic ${secretName} --from-literal=${secretKey}=...\``);
}

// Image.
const imageRef = container.image ?? '';
const tag = /^[^@]*\/?[^/:@]+:([^/:@]+)$/.exec(imageRef)?.[1];
check(tag !== undefined, `image "${imageRef}" has no tag`);
check(tag !== 'latest', `image "${imageRef}" uses :latest`);
check(tag === version, `image tag "${tag}" is not the project version ${version}`);
check(!/:latest\b/.test(text), 'the rendered manifests mention :latest');

// Security context (container settings override the pod's).
const psc = podSpec.securityContext ?? {};
const csc = container.securityContext ?? {};
const eff = (key) => csc[key] ?? psc[key];
check(eff('runAsNonRoot') === true, 'runAsNonRoot must be true');
check(eff('runAsUser') === image.uid && image.uid > 0, `runAsUser ${eff('runAsUser')} is not the image's non-root user ${image.uid}`);
check(eff('runAsGroup') === image.gid, `runAsGroup ${eff('runAsGroup')} is not the image's group ${image.gid}`);
check(psc.fsGroup === image.gid, `fsGroup ${psc.fsGroup} must be ${image.gid} so the volume is ${shared ? 'readable' : 'writable'}`);
check(csc.readOnlyRootFilesystem === true, 'readOnlyRootFilesystem must be true');
check(csc.allowPrivilegeEscalation === false, 'allowPrivilegeEscalation must be false');
check(csc.privileged !== true, 'the container must not be privileged');
check((csc.capabilities?.drop ?? []).includes('ALL'), 'capabilities must drop ALL');
check((csc.capabilities?.add ?? []).length === 0, 'no capability may be added');
check((csc.seccompProfile ?? psc.seccompProfile)?.type === 'RuntimeDefault', 'seccompProfile must be RuntimeDefault');
check(podSpec.hostNetwork !== true && podSpec.hostPID !== true, 'no host namespaces');
check(podSpec.automountServiceAccountToken === false, 'the pod needs no API token');

// Resources.
for (const kind of ['requests', 'limits']) {
  for (const r of ['cpu', 'memory']) {
    check(quantity(container.resources?.[kind]?.[r]) > 0, `resources.${kind}.${r} is missing`);
  }
}
for (const r of ['cpu', 'memory']) {
  check(quantity(container.resources?.requests?.[r]) <= quantity(container.resources?.limits?.[r]),
    `resources.requests.${r} exceeds the limit`);
}

// gRPC's memory quota below the pod's memory limit, with room for the rest of
// the process, so that gRPC refuses work before the kernel kills the pod.
{
  const limitMiB = quantity(container.resources?.limits?.memory) / (1024 * 1024);
  const quota = Number(flags.get('max_memory_mb'));
  check(Number.isInteger(quota) && quota > 0,
    `--max_memory_mb=${flags.get('max_memory_mb')} must be set: the default (256) is the pod's whole limit`);
  check(limitMiB - quota >= 64,
    `--max_memory_mb=${quota} leaves ${limitMiB - quota} MiB of the ${limitMiB} MiB limit for the rest of the process; keep at least 64`);
}

// The NetworkPolicy: the pods accept the gRPC port only from labelled client
// pods and the metrics port only from a monitoring namespace, nothing else.
{
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
  const np = policies[0]?.spec ?? {};
  check(policies.length === 1, `expected one NetworkPolicy, found ${policies.length}`);
  check(isSubset(np.podSelector?.matchLabels, podLabels) && Object.keys(np.podSelector?.matchLabels ?? {}).length > 0,
    'the NetworkPolicy does not select the pods');
  check((np.policyTypes ?? []).includes('Ingress'), 'the NetworkPolicy must restrict Ingress');
  const rules = np.ingress ?? [];
  const portsOf = (rule) => (rule.ports ?? []).map((p) => p.port);
  const grpcRule = rules.filter((r) => portsOf(r).some((p) => p === 'grpc' || p === listen?.port));
  const metricsRule = rules.filter((r) => portsOf(r).some((p) => p === 'metrics' || p === metricsListen?.port));
  check(rules.every((r) => (r.ports ?? []).length > 0), 'every ingress rule must name its ports (a rule without ports opens all)');
  check(rules.every((r) => (r.from ?? []).length > 0), 'every ingress rule must name who may connect (a rule without from admits everyone)');
  check(rules.every((r) => (r.from ?? []).every((f) => !f.ipBlock)), 'no ipBlock: the policy admits pods by label, not addresses');
  check(grpcRule.length === 1 && grpcRule[0].from.every((f) => f.podSelector && Object.keys(f.podSelector.matchLabels ?? {}).length > 0),
    'the gRPC port must admit only pods with a client label');
  check(metricsRule.length === 1 && metricsRule[0].from.every((f) => f.namespaceSelector && Object.keys(f.namespaceSelector.matchLabels ?? {}).length > 0),
    'the metrics port must admit only a monitoring namespace');
  check(rules.length === 2, `expected two ingress rules (gRPC, metrics), found ${rules.length}`);
}

if (variant === 'authz') {
  // The policy from the ConfigMap, the tokens from the user's Secret, each
  // mounted read-only as a folder (a subPath mount misses updates).
  const policyFile = flags.get('authz_policy') ?? '';
  const tokensFile = flags.get('authz_tokens') ?? '';
  const policyMount = mountFor(container, policyFile);
  const tokensMount = mountFor(container, tokensFile);
  const policyVolume = (podSpec.volumes ?? []).find((v) => v.name === policyMount?.name);
  const tokensVolume = (podSpec.volumes ?? []).find((v) => v.name === tokensMount?.name);
  const configMap = objects.find((o) => o.kind === 'ConfigMap');
  check(policyFile.startsWith('/') && policyVolume?.configMap?.name === configMap?.metadata?.name,
    `--authz_policy=${policyFile} is not a file of the policy ConfigMap`);
  check(tokensFile.startsWith('/') && tokensVolume?.secret?.secretName === 'hilo-tokens',
    `--authz_tokens=${tokensFile} is not a file of the Secret hilo-tokens`);
  for (const m of [policyMount, tokensMount]) {
    check(m?.readOnly === true && m?.subPath === undefined, `mount ${m?.name} must be read-only and not by subPath`);
  }
  const mode = tokensVolume?.secret?.defaultMode ?? 0o644;
  check((mode & 0o007) === 0, `the tokens file (mode ${mode.toString(8)}) must not be readable by others`);
  const policyText = Object.values(configMap?.data ?? {}).join('\n');
  const grants = policyText.split('\n').filter((l) => /^\s*grant\b/.test(l)).length;
  check(grants > 0, 'the policy ConfigMap grants nothing: every caller would be refused');
  check(!objects.some((o) => o.kind === 'Secret'), 'no Secret in the manifests: the tokens are the user\'s');
  const readme = fs.readFileSync(path.join(src, 'deploy', 'README.md'), 'utf8');
  check(/kubectl create secret generic hilo-tokens[\s\\]+(?:-n \S+[\s\\]+)?--from-file=tokens=/.test(readme),
    'deploy/README.md must document `kubectl create secret generic hilo-tokens --from-file=tokens=...`');
}

// Drain: the grace period covers preStop, --shutdown_grace and the exit.
const preStopSleep = container.lifecycle?.preStop?.sleep?.seconds ?? 0;
const period = podSpec.terminationGracePeriodSeconds ?? 30;
check(period >= preStopSleep + grace + 2,
  `terminationGracePeriodSeconds ${period} does not cover preStop ${preStopSleep}s + --shutdown_grace ${grace}s + 2s`);

// Services and the PodDisruptionBudget.
check(services.length === 2 && headless !== undefined && client !== undefined,
  'expected one headless and one client Service');
for (const s of services) {
  check(isSubset(s.spec.selector, podLabels), `Service ${s.metadata.name} does not select the pods`);
  const grpcPort = (s.spec.ports ?? []).find((p) => p.name === 'grpc');
  check(grpcPort !== undefined && (grpcPort.targetPort === 'grpc' || grpcPort.targetPort === listen?.port),
    `Service ${s.metadata.name} has no "grpc" port to the container's gRPC port`);
  for (const p of s.spec.ports ?? []) {
    if (typeof p.targetPort === 'string') {
      check(p.targetPort in portByName, `Service ${s.metadata.name} targets unknown container port "${p.targetPort}"`);
    }
  }
}
check(headless?.spec?.publishNotReadyAddresses !== true, 'the headless Service must list only ready pods');
const headlessMetrics = (headless?.spec?.ports ?? []).find((p) => p.name === 'metrics');
check(headlessMetrics !== undefined && (headlessMetrics.targetPort === 'metrics' || headlessMetrics.targetPort === metricsListen?.port),
  'the headless Service has no "metrics" port to the container\'s metrics port');
check(pdbs.length === 1, 'expected one PodDisruptionBudget');
const pdb = pdbs[0]?.spec ?? {};
check(isSubset(pdb.selector?.matchLabels, podLabels), 'the PodDisruptionBudget does not select the pods');
check(pdb.maxUnavailable === 1 || (Number.isInteger(pdb.minAvailable) && pdb.minAvailable === sts.spec.replicas - 1),
  'the PodDisruptionBudget should let exactly one pod go at a time');

// Prometheus.
check(annotations['prometheus.io/scrape'] === (variant === 'prometheus-operator' ? 'false' : 'true'),
  `prometheus.io/scrape is "${annotations['prometheus.io/scrape']}" in the ${variant} variant`);
check(annotations['prometheus.io/port'] === String(metricsListen?.port),
  `prometheus.io/port "${annotations['prometheus.io/port']}" is not the --metrics_listen port`);
check(annotations['prometheus.io/path'] === '/metrics', 'prometheus.io/path must be /metrics');
if (variant === 'prometheus-operator') {
  const monitor = objects.find((o) => o.kind === 'ServiceMonitor');
  const selected = services.filter((s) => isSubset(monitor?.spec?.selector?.matchLabels, s.metadata.labels));
  check(selected.length === 1 && selected[0] === headless,
    'the ServiceMonitor must select exactly the headless Service (one target per pod)');
  const endpoint = monitor?.spec?.endpoints?.[0];
  check(monitor?.spec?.endpoints?.length === 1 && endpoint?.port === headlessMetrics?.name,
    'the ServiceMonitor endpoint must use the headless Service\'s metrics port');
  check(endpoint?.path === annotations['prometheus.io/path'], 'the ServiceMonitor path differs from the annotation');
  // The PrometheusRule carries exactly the rules that promtool and a live
  // Prometheus test (tests/monitoring), and the job name they assume.
  const rule = objects.find((o) => o.kind === 'PrometheusRule');
  const rulesFile = YAML.parse(fs.readFileSync(path.join(src, 'deploy', 'monitoring', 'hilo-rules.yaml'), 'utf8'));
  check(canonical(rule?.spec) === canonical(rulesFile),
    'the PrometheusRule differs from deploy/monitoring/hilo-rules.yaml: run deploy/monitoring/make-prometheusrule.sh');
  check(headless?.metadata?.name === 'hilo' && monitor?.spec?.jobLabel === undefined,
    'the rules select job="hilo", the name the ServiceMonitor gives the job (its Service\'s)');
}

// ------------------------ 4. postgresql: the base's pod, but for the store
// The Deployment's pod is written out in full (kustomize cannot turn a
// StatefulSet into a Deployment); this keeps it from drifting from the base.
if (shared && check(options.base !== undefined, 'the postgresql variant needs --base, the rendered base')) {
  const baseObjects = YAML.parseAllDocuments(fs.readFileSync(options.base, 'utf8'))
    .map((doc) => doc.toJS()).filter((o) => o !== null);
  const { sts: baseSts, container: baseContainer } = findWorkload('StatefulSet', baseObjects);
  const same = (a, b, what) => check(JSON.stringify(a) === JSON.stringify(b),
    `${what} differs from the base's: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  const basePod = baseSts.spec.template;
  same(sts.spec.selector, baseSts.spec.selector, 'the selector');
  same(sts.spec.template.metadata, basePod.metadata, 'the pod template metadata (labels, annotations)');
  for (const key of ['terminationGracePeriodSeconds', 'automountServiceAccountToken', 'enableServiceLinks',
    'securityContext', 'topologySpreadConstraints', 'affinity', 'nodeSelector', 'tolerations',
    'priorityClassName', 'serviceAccountName']) {
    same(podSpec[key], basePod.spec[key], `pod ${key}`);
  }
  for (const key of ['image', 'imagePullPolicy', 'command', 'ports', 'startupProbe', 'readinessProbe',
    'lifecycle', 'resources', 'securityContext', 'env', 'envFrom']) {
    same(container[key], baseContainer[key], `container ${key}`);
  }
  // Liveness: the same timing, only the TCP port instead of the health status.
  const { grpc: _g, ...liveTiming } = baseContainer.livenessProbe ?? {};
  const { tcpSocket: _t, ...ownTiming } = container.livenessProbe ?? {};
  same(ownTiming, liveTiming, 'the livenessProbe timing');
  // Arguments: the base's, less the SQLite ones, plus the store's.
  const baseFlags = parseFlags(baseContainer.args ?? []);
  for (const drop of ['db', 'create_db', 'sync', 'node_tag_from_hostname']) baseFlags.delete(drop);
  baseFlags.set('store_file', flags.get('store_file'));
  baseFlags.set('node_tag_hashed_from_hostname', 'true');
  same(Object.fromEntries([...flags].sort()), Object.fromEntries([...baseFlags].sort()), 'the flags (less --db/--create_db/--sync/--node_tag_from_hostname)');
}

// ---------------------------------------------------------------- report
const name = path.basename(files[0]);
if (failures.length > 0) {
  for (const f of failures) console.error(`manifests.mjs: ${name}: FAIL: ${f}`);
  console.error(`manifests.mjs: ${name}: ${passed} checks passed, ${failures.length} failed`);
  process.exit(1);
}
console.log(`manifests.mjs: ${name} (${variant}): ${objects.length} objects valid against the Kubernetes schemas and types; ${passed} checks passed`);
