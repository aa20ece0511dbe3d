// SPDX-License-Identifier: Apache-2.0
// isola's JavaScript (and TypeScript) context for the code-interpreter service: one persistent realm.
//
// Started by share/interp/server.py as `node --expose-internals jskernel.js`. Protocol: the first
// stdin line is the number of the fd to answer on; then one JSON request per stdin line,
// {"code", "env", "ts"}, run one at a time in this process's own realm (globals, `var`s,
// `let`/`const`, required modules and process.cwd() persist). Each request is answered on that fd
// with E2B-shaped JSON lines: number_of_executions, stdout, stderr, result (the last expression's
// value, util.inspect'ed, as text/plain), error {name, value: message, traceback: stack}, and
// finally {"type": "done"}. Top-level await uses node's own REPL rewrite (internal/repl/await,
// hence --expose-internals). SIGINT interrupts the running cell (vm's breakOnSigint) or abandons
// the awaited promise; the realm survives.
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');

let processTopLevelAwait = null;
try {
  ({ processTopLevelAwait } = require('internal/repl/await'));
} catch (_) {
  // no --expose-internals: top-level await is then a SyntaxError, reported as such
}

let outFd = -1;
let count = 0;
let running = null; // {abort(err)} while a cell awaits

function send(obj) {
  const buf = Buffer.from(JSON.stringify(obj) + '\n');
  for (let off = 0; off < buf.length;) {
    try {
      off += fs.writeSync(outFd, buf, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') process.exit(1);
    }
  }
}

function hook(stream, type) {
  stream.write = (chunk, enc, cb) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    send({ type, text });
    const done = typeof enc === 'function' ? enc : cb;
    if (done) process.nextTick(done);
    return true;
  };
}

// The stack down to the user's cells: the kernel's own frames (vm, this file) are cut.
function userStack(stack) {
  const lines = String(stack || '').split('\n');
  const cut = lines.findIndex((l, i) => i > 0 && /\(node:vm:|jskernel\.js:|at process\.<anonymous>/.test(l));
  return (cut > 0 ? lines.slice(0, cut) : lines).join('\n');
}

function errorLine(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    return { type: 'error', name: String(e.name || 'Error'), value: String(e.message || ''),
      traceback: userStack(e.stack) };
  }
  return { type: 'error', name: 'Error', value: 'Uncaught ' + util.inspect(e), traceback: '' };
}

// TypeScript to JavaScript: node's own type stripping (node >= 22.13), else the TypeScript
// compiler's transpileModule (a `typescript` the cell's require finds, or Debian's
// node-typescript), which also lowers enums and namespaces. Type errors are not reported.
const TS_PATHS = ['typescript', '/usr/share/nodejs/typescript'];

function stripTypes(code) {
  const m = require('module');
  if (typeof m.stripTypeScriptTypes === 'function') return m.stripTypeScriptTypes(code, { mode: 'transform' });
  for (const p of TS_PATHS) {
    let ts;
    try {
      ts = globalThis.require(p);
    } catch (_) {
      continue;
    }
    return ts.transpileModule(code, {
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
      reportDiagnostics: false,
    }).outputText;
  }
  throw new Error('TypeScript needs node >= 22.13 or the TypeScript compiler (Debian: node-typescript)');
}

async function runCell(req) {
  count += 1;
  send({ type: 'number_of_executions', execution_count: count });
  const saved = {};
  for (const [k, v] of Object.entries(req.env || {})) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  globalThis.require = createRequire(path.join(process.cwd(), '[interp]'));
  try {
    let code = req.code;
    if (req.ts) code = stripTypes(code);
    let rewritten = null;
    if (processTopLevelAwait && /\bawait\b/.test(code)) {
      try {
        rewritten = processTopLevelAwait(code);
      } catch (_) {
        rewritten = null; // not parseable as such: let vm report the SyntaxError
      }
    }
    const script = new vm.Script(rewritten || code, { filename: `cell${count}` });
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (rewritten) {
      const aborted = new Promise((_, reject) => { running = { abort: reject }; });
      const wrapped = await Promise.race([value, aborted]);
      value = wrapped ? wrapped.value : undefined;
    }
    if (value !== undefined) {
      send({ type: 'result', text: util.inspect(value), is_main_result: true });
    }
  } catch (e) {
    send(errorLine(e));
  } finally {
    running = null;
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    send({ type: 'done' });
  }
}

function main() {
  process.on('SIGINT', () => {
    if (running) running.abort(new Error('Execution interrupted'));
  });
  process.on('uncaughtException', (e) => send({ type: 'stderr', text: 'Uncaught ' + util.inspect(e) + '\n' }));
  process.on('unhandledRejection', (e) => send({ type: 'stderr', text: 'Unhandled rejection ' + util.inspect(e) + '\n' }));
  let buf = '';
  const queue = [];
  let busy = false;
  const pump = async () => {
    if (busy) return;
    busy = true;
    while (queue.length) await runCell(queue.shift());
    busy = false;
  };
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (outFd < 0) {
        outFd = Number(line);
        hook(process.stdout, 'stdout');
        hook(process.stderr, 'stderr');
        continue;
      }
      try {
        queue.push(JSON.parse(line));
      } catch (e) {
        send({ type: 'stderr', text: `jskernel: bad request line: ${e.message}\n` });
        send({ type: 'done' });
        continue;
      }
      pump();
    }
  });
  process.stdin.on('end', () => process.exit(0));
}

main();
