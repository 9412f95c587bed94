/**
 * The handler bundles, built exactly as the CDK stack builds them (a synth of DgclStack with the
 * real functions/), run the way Lambda runs them, on this repo's Node 22 without Lambda's patched
 * module loader:
 *  - each bundle alone in its own task folder (LAMBDA_TASK_ROOT), no node_modules anywhere above;
 *  - the real LanceDB layer (built by infra/lancedb-layer.ts) at its own path, <tmp>/opt/nodejs/
 *    node_modules, reachable only through NODE_PATH as on Lambda;
 *  - only Lambda's environment (NODE_PATH, _HANDLER, LAMBDA_TASK_ROOT, AWS_* of the runtime) plus
 *    the function's variables from the template, DGCL_ROOT pointed at a local file:// root;
 *  - a tiny bootstrap that imports the bundle and calls `handler(event, context)` like Lambda's
 *    runtime does.
 * Each handler gets a direct event, append and resume an SQS event too (resume sends to a local
 * SQS, fauxqs). A control case shows the harness catches a bundle that imports a layer package
 * by bare ESM name (what the bundles did before): it fails with ERR_MODULE_NOT_FOUND.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as esbuild from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqsEvent } from '../../functions/shared/events.ts';
import { readConfig } from '../../infra/config.ts';
import { buildLancedbLayer } from '../../infra/lancedb-layer.ts';
import { DgclStack, HANDLERS, LAYER_MODULES, type HandlerName } from '../../infra/stack.ts';
import { createBatch, stepBatch } from '../support/batches.ts';
import { startLocalSqs, type LocalSqs } from '../functions/support/sqs.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CDK_CONTEXT = (JSON.parse(fs.readFileSync(path.join(REPO, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> }).context;
const NAMES = Object.keys(HANDLERS) as HandlerName[];

/** Imports the bundle named by _HANDLER from LAMBDA_TASK_ROOT and invokes it once per event. */
const BOOTSTRAP = `
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
const [eventsFile, resultFile] = process.argv.slice(2);
const [moduleName, exportName] = process.env._HANDLER.split('.');
const out = { node: process.versions.node, results: [], loaded: [] };
try {
  const mod = await import(pathToFileURL(path.join(process.env.LAMBDA_TASK_ROOT, moduleName + '.mjs')).href);
  for (const event of JSON.parse(fs.readFileSync(eventsFile, 'utf8'))) {
    const deadline = Date.now() + 60_000;
    const requestId = crypto.randomUUID();
    const context = {
      callbackWaitsForEmptyEventLoop: true,
      functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
      functionVersion: '$LATEST',
      invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:' + process.env.AWS_LAMBDA_FUNCTION_NAME,
      memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
      awsRequestId: requestId,
      logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
      logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    };
    try {
      out.results.push({ ok: await mod[exportName](event, context) });
    } catch (e) {
      out.results.push({ error: { name: e.name, code: e.code, message: e.message } });
    }
  }
} catch (e) {
  out.initError = { name: e.name, code: e.code, message: e.message };
}
out.loaded = Object.keys(createRequire(import.meta.url).cache);
fs.writeFileSync(resultFile, JSON.stringify(out));
`;

interface RunOutput {
  node: string;
  initError?: { name: string; code?: string; message: string };
  results: Array<{ ok?: any; error?: { name: string; code?: string; message: string } }>;
  loaded: string[];
  stdout: string;
}

let tmp: string;
let layerNodeModules: string;
let rootDir: string;
let sqs: LocalSqs;
let resumeQueueUrl: string;
const bundles = {} as Record<HandlerName, { code: string; env: Record<string, unknown> }>;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dgcl-lambda-layout-'));
  // The real layer, at its own path (<tmp>/opt/nodejs/node_modules), as Lambda mounts it.
  const layer = await buildLancedbLayer({ nodeModulesDir: path.join(REPO, 'node_modules'), outDir: path.join(tmp, 'opt'), strip: false, verify: false });
  layerNodeModules = path.join(layer.dir, 'nodejs', 'node_modules');

  // Synthesize the stack with the real handlers; its layer asset is a stand-in (the functions'
  // bundles do not depend on it, and staging the real one would copy ~200 MB again).
  const stubLayer = path.join(tmp, 'stub-layer');
  fs.mkdirSync(path.join(stubLayer, 'nodejs', 'node_modules'), { recursive: true });
  fs.writeFileSync(path.join(stubLayer, 'nodejs', 'node_modules', 'stub.js'), '');
  const app = new App({ outdir: path.join(tmp, 'cdk.out'), context: CDK_CONTEXT });
  const stack = new DgclStack(app, 'LayoutStack', { config: readConfig(app.node), projectRoot: REPO, layer: { dir: stubLayer, fingerprint: 'stub' } });
  const template = Template.fromStack(stack).toJSON() as { Resources: Record<string, { Properties: Record<string, any> }> };
  const assembly = app.synth();
  const assets = JSON.parse(fs.readFileSync(path.join(assembly.directory, 'LayoutStack.assets.json'), 'utf8')) as {
    files: Record<string, { source: { path: string } }>;
  };
  for (const name of NAMES) {
    const props = template.Resources[stack.getLogicalId(stack.functions[name].node.defaultChild as never)]!.Properties;
    expect(props.Handler).toBe('index.handler');
    const dir = path.join(assembly.directory, assets.files[(props.Code.S3Key as string).replace(/\.zip$/, '')]!.source.path);
    bundles[name] = { code: fs.readFileSync(path.join(dir, 'index.mjs'), 'utf8'), env: props.Environment.Variables };
  }

  rootDir = path.join(tmp, 'root');
  fs.mkdirSync(rootDir);
  fs.writeFileSync(path.join(tmp, 'bootstrap.mjs'), BOOTSTRAP);
  sqs = await startLocalSqs();
  resumeQueueUrl = await sqs.newQueue('dgcl-layout-resume');
}, 240_000);

afterAll(async () => {
  await sqs?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** The function's template variables, with the deployment's tokens replaced by local values. */
function functionEnv(name: HandlerName): Record<string, string> {
  const local: Record<string, string> = {
    DGCL_ROOT: `file://${rootDir}`,
    DGCL_LEASE_TABLE: 'dgcl-leases', // a file:// root keeps its leases beside the logs
    DGCL_RESUME_QUEUE_URL: resumeQueueUrl,
  };
  return Object.fromEntries(
    Object.entries(bundles[name].env).map(([k, v]) => {
      if (typeof v === 'string') return [k, v];
      if (!(k in local)) throw new Error(`${name}: no local value for the deployment-time variable ${k}`);
      return [k, local[k]!];
    }),
  );
}

/** Runs `code` as `<tmp>/task-<id>/index.mjs` with Lambda's environment only; one process, every event in turn. */
async function invoke(id: string, name: HandlerName, code: string, events: unknown[]): Promise<RunOutput> {
  const task = path.join(tmp, `task-${id}`);
  fs.mkdirSync(task, { recursive: true });
  fs.writeFileSync(path.join(task, 'index.mjs'), code);
  const eventsFile = path.join(tmp, `events-${id}.json`);
  const resultFile = path.join(tmp, `result-${id}.json`);
  fs.writeFileSync(eventsFile, JSON.stringify(events));
  fs.rmSync(resultFile, { force: true });
  const env: Record<string, string> = {
    // What the Lambda Node.js runtime sets (minus its own /var/runtime entries).
    NODE_PATH: [path.join(tmp, 'opt', 'nodejs', 'node22', 'node_modules'), layerNodeModules, task].join(path.delimiter),
    _HANDLER: 'index.handler',
    LAMBDA_TASK_ROOT: task,
    LAMBDA_RUNTIME_DIR: path.join(tmp, 'runtime'),
    AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
    AWS_LAMBDA_FUNCTION_NAME: `dgcl-${name}`,
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(HANDLERS[name].memoryMiB),
    AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/dgcl-${name}`,
    AWS_LAMBDA_LOG_STREAM_NAME: `2026/12/01/[$LATEST]${id}`,
    AWS_REGION: 'us-east-1',
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_SESSION_TOKEN: 'test',
    AWS_ENDPOINT_URL_SQS: sqs.endpoint,
    TZ: ':UTC',
    LANG: 'en_US.UTF-8',
    PATH: '/usr/local/bin:/usr/bin:/bin',
    ...functionEnv(name),
  };
  // Asynchronous: the local SQS the resume handler sends to runs in this process.
  const child = spawn(process.execPath, [path.join(tmp, 'bootstrap.mjs'), eventsFile, resultFile], { cwd: task, env, timeout: 120_000 });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const status = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (!fs.existsSync(resultFile)) throw new Error(`the bootstrap of ${id} wrote no result (exit ${status}):\n${stderr}\n${stdout}`);
  return { ...(JSON.parse(fs.readFileSync(resultFile, 'utf8')) as Omit<RunOutput, 'stdout'>), stdout };
}

/** The EMF metric documents Powertools printed. */
function emf(stdout: string): Array<Record<string, any>> {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes('"_aws"'))
    .map((l) => JSON.parse(l) as Record<string, any>);
}

function okOf(out: RunOutput, i: number): any {
  expect(out.initError, JSON.stringify(out.initError)).toBeUndefined();
  const r = out.results[i]!;
  expect(r.error, JSON.stringify(r.error)).toBeUndefined();
  return r.ok;
}

/** LanceDB and Arrow came from the layer folder, nowhere else. */
function expectLoadedFromLayer(out: RunOutput): void {
  const layerFiles = out.loaded.filter((f) => /[\\/](@lancedb|apache-arrow)[\\/]/.test(f));
  expect(layerFiles.some((f) => f.endsWith('.node')), 'the native module was loaded').toBe(true);
  expect(layerFiles.some((f) => f.includes(`${path.sep}apache-arrow${path.sep}`))).toBe(true);
  for (const f of layerFiles) expect(f.startsWith(layerNodeModules + path.sep), f).toBe(true);
}

const pipeline = 'p';
const experiment = 'layout';

describe('handler bundles in the Lambda layout, on stock Node 22', () => {
  it('the bundles import no layer package by bare ESM name', () => {
    for (const name of NAMES) {
      for (const m of LAYER_MODULES) {
        expect(bundles[name].code, name).not.toMatch(new RegExp(`(from|import)\\s*\\(?\\s*["']${m.replace('/', '\\/')}(\\/[^"']*)?["']`));
      }
      expect(bundles[name].code, name).toContain('loadLayerModule("@lancedb/lancedb")');
    }
  });

  it('append: a direct invocation and an SQS event (one invalid record failed alone)', async () => {
    const sqsIn = sqsEvent(
      [
        { pipeline, experiment, ...createBatch('b') },
        '{not json',
        { pipeline, experiment, ...stepBatch('b', 1) },
      ],
      { queueArn: 'arn:aws:sqs:us-east-1:123456789012:dgcl-append.fifo', groupIds: ['b', 'c', 'b'], messageIds: ['m-b0', 'm-bad', 'm-b1'] },
    );
    const out = await invoke('append', 'append', bundles.append.code, [
      { pipeline, experiment, batches: [createBatch('a'), stepBatch('a', 1)] },
      sqsIn,
    ]);
    expect(out.node.split('.')[0]).toBe('22');
    const direct = okOf(out, 0) as { acks: Array<{ itemId: string; duplicate: boolean }> };
    expect(direct.acks.map((a) => [a.itemId, a.duplicate])).toEqual([
      ['a', false],
      ['a', false],
    ]);
    expect(okOf(out, 1)).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-bad' }] });
    expectLoadedFromLayer(out);
    // The record-failure metric the stack alarms on: namespace, name and service dimension.
    const docs = emf(out.stdout).filter((d) => 'BatchItemFailures' in d);
    expect(docs).toHaveLength(1);
    expect(docs[0]!.BatchItemFailures).toBe(1);
    expect(docs[0]!.service).toBe('dgcl-append');
    expect(docs[0]!._aws.CloudWatchMetrics[0].Namespace).toBe('dgcl');
  });

  it('fold: an item and a page of items, on the log append wrote', async () => {
    const out = await invoke('fold', 'fold', bundles.fold.code, [
      { pipeline, experiment, itemId: 'b' },
      { pipeline, experiment },
    ]);
    expect(okOf(out, 0)).toMatchObject({ itemId: 'b', cursor: { stepIndex: 1 } });
    expect((okOf(out, 1) as { items: Array<{ itemId: string }> }).items.map((i) => i.itemId)).toEqual(['a', 'b']);
    expectLoadedFromLayer(out);
  });

  it('resume: a direct invocation and an SQS event send to the resume queue', async () => {
    const out = await invoke('resume', 'resume', bundles.resume.code, [
      { pipeline, experiment, itemIds: ['a', 'nope'] },
      sqsEvent([{ pipeline, experiment, itemId: 'b' }], { messageIds: ['r-b'] }),
    ]);
    const direct = okOf(out, 0) as { sent: Array<{ itemId: string; nextStepIndex: number }>; missing: Array<{ itemId: string }> };
    expect(direct.sent.map((s) => [s.itemId, s.nextStepIndex])).toEqual([['a', 2]]);
    expect(direct.missing.map((m) => m.itemId)).toEqual(['nope']);
    expect(okOf(out, 1)).toMatchObject({ batchItemFailures: [], sent: [{ itemId: 'b', nextStepIndex: 2 }] });
    const got = (await sqs.drain(resumeQueueUrl)) as Array<{ itemId: string }>;
    expect(got.map((g) => g.itemId).sort()).toEqual(['a', 'b']);
    expectLoadedFromLayer(out);
  });

  it('maintenance: the scheduled (empty) event and a narrowed one', async () => {
    const out = await invoke('maintenance', 'maintenance', bundles.maintenance.code, [{}, { pipeline, experiment }]);
    const all = okOf(out, 0) as { summary: { experiments: number; ran: number; failed: number } };
    expect(all.summary).toMatchObject({ experiments: 1, ran: 1, failed: 0 });
    expect((okOf(out, 1) as { experiments: Array<{ experiment: string }> }).experiments.map((e) => e.experiment)).toEqual([`${pipeline}/${experiment}`]);
    expectLoadedFromLayer(out);
  });

  it('control: the same harness fails a bundle that imports the layer by bare ESM name', async () => {
    // fold bundled the way the stack did before (layer packages external, no CommonJS shims).
    const r = esbuild.buildSync({
      entryPoints: [path.join(REPO, 'functions', 'fold.ts')],
      bundle: true,
      write: false,
      platform: 'node',
      format: 'esm',
      target: 'node22',
      mainFields: ['module', 'main'],
      external: [...LAYER_MODULES, 'apache-arrow/*'],
      banner: { js: "import { createRequire as __dgclCreateRequire } from 'node:module'; const require = __dgclCreateRequire(import.meta.url);" },
      logLevel: 'silent',
    });
    const code = r.outputFiles[0]!.text;
    expect(code).toMatch(/from "apache-arrow"|from "@lancedb\/lancedb"/);
    const out = await invoke('bare-esm', 'fold', code, [{ pipeline, experiment, itemId: 'b' }]);
    expect(out.initError?.code).toBe('ERR_MODULE_NOT_FOUND');
    expect(out.initError?.message).toMatch(/Cannot find package '(apache-arrow|@lancedb\/lancedb)'/);
  });
});
