#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (the npm package onnxruntime-node, CPU) on the rows of an
// .npy file and writes one of its outputs as an .npy: the runtime side of scripts/onnx_check.sh.
//
//   node scripts/onnx_run.js MODEL.onnx INPUT.npy OUT.npy [--output NAME] [--batch B]
//
// INPUT.npy: float32 or uint8 (converted to float32), C order, shape (N, ...) as the model's input
// 'input' takes it; OUT.npy: float32 (N, K), the output NAME (default: 'probabilities' when the
// model has it, else 'values' (a regression with normalize_targets), else 'output'). Prints one JSON line: the runtime's version, the output's name and
// shape. onnxruntime-node is looked up in $ONNX_PEER/node_modules (default build/onnx-peer), where
// `npm install --prefix build/onnx-peer onnxruntime-node` puts it.
'use strict';
const fs = require('fs');
const path = require('path');

function usage(message) {
  process.stderr.write(`onnx_run: ${message}\nusage: node scripts/onnx_run.js MODEL.onnx INPUT.npy OUT.npy ` +
                       '[--output NAME] [--batch B]\n');
  process.exit(2);
}

function loadRuntime() {
  const peer = process.env.ONNX_PEER || path.join(__dirname, '..', 'build', 'onnx-peer');
  try {
    return require(path.join(path.resolve(peer), 'node_modules', 'onnxruntime-node'));
  } catch (e) {
    process.stderr.write(`onnx_run: onnxruntime-node is not installed under ${peer} (${e.code || e.message}); ` +
                         `install it with: npm install --prefix ${peer} onnxruntime-node\n`);
    process.exit(3);
  }
}

// The .npy format, version 1.0-3.0: magic, version, header length, a Python dict literal header.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not an .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order is not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const data = buf.subarray(start + headerLen);
  let values;
  if (descr === '<f4') {
    values = new Float32Array(count);
    for (let i = 0; i < count; ++i) values[i] = data.readFloatLE(i * 4);
  } else if (descr === '|u1' || descr === '<u1') {
    values = Float32Array.from(data.subarray(0, count));
  } else {
    throw new Error(`${file}: dtype ${descr}; expected float32 (<f4) or uint8 (|u1)`);
  }
  return {shape, values};
}

function writeNpy(file, shape, values) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.alloc(values.length * 4);
  for (let i = 0; i < values.length; ++i) body.writeFloatLE(values[i], i * 4);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const args = process.argv.slice(2);
  const positional = [];
  let outputName = '';
  let batch = 100;
  for (let i = 0; i < args.length; ++i) {
    if (args[i] === '--output') outputName = args[++i];
    else if (args[i] === '--batch') batch = Number(args[++i]);
    else if (args[i].startsWith('--')) usage(`unknown flag ${args[i]}`);
    else positional.push(args[i]);
  }
  if (positional.length !== 3) usage('expected MODEL.onnx INPUT.npy OUT.npy');
  if (!(batch >= 1)) usage('--batch must be a positive integer');
  const [modelPath, inputPath, outPath] = positional;
  const ort = loadRuntime();
  const session = await ort.InferenceSession.create(modelPath, {executionProviders: ['cpu']});
  if (!outputName)  // what trainer predict writes: probabilities, values (normalize_targets) or output
    outputName = ['probabilities', 'values', 'output'].find((n) => session.outputNames.includes(n));
  if (!session.outputNames.includes(outputName))
    usage(`the model has no output '${outputName}' (outputs: ${session.outputNames.join(', ')})`);
  const input = readNpy(inputPath);
  const n = input.shape[0];
  const rowSize = input.values.length / n;
  const rows = [];
  let width = 0;
  for (let begin = 0; begin < n; begin += batch) {
    const count = Math.min(batch, n - begin);
    const x = new ort.Tensor('float32', input.values.subarray(begin * rowSize, (begin + count) * rowSize),
                             [count, ...input.shape.slice(1)]);
    const result = await session.run({input: x}, [outputName]);
    const y = result[outputName];
    width = y.data.length / count;
    rows.push(Float32Array.from(y.data));
  }
  const out = new Float32Array(n * width);
  let at = 0;
  for (const r of rows) {
    out.set(r, at);
    at += r.length;
  }
  writeNpy(outPath, [n, width], out);
  process.stdout.write(JSON.stringify({runtime: 'onnxruntime-node', version: ort.env.versions.node || ort.env.versions.common,
                                       output: outputName, shape: [n, width]}) + '\n');
}

main().catch((e) => {
  process.stderr.write(`onnx_run: ${e.message || e}\n`);
  process.exit(1);
});
