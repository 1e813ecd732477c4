// One GGUF file optkit wrote, read by node-llama-cpp (its own GGUF metadata reader, then
// llama.cpp's loader and CPU kernels) and compared with what optkit's runtime made of the same file
// (tests/conformance/gguf_greedy.cpp's JSON lines):
//   - metadata: the architecture, the file type, and every tensor's ggml type and bytes as
//     llama-quantize writes them for the same model (testdata/golden/gguf_llama_quantize*.json:
//     the architecture and each tensor's SHA-256; a file with an importance matrix against
//     llama-quantize's with the same matrix, "<type> imatrix"; but rope_freqs, computed: optkit writes llama.cpp's converter's values, and
//     the golden file was made through ../shared/tools/to_gguf.py, whose float64 arithmetic gives
//     two of them one ulp off);
//   - tokenization: llama.cpp's token ids for each prompt equal optkit's (BOS added by both);
//   - teacher-forced log-probabilities of the prompt tokens agree: within 0.03 nats on average and
//     0.5 nats for every token (llama.cpp quantizes activations to 8 bits for its quantized dot
//     products, optkit multiplies in fp32; a wrong block layout, scale or row permutation costs
//     nats on every token);
//   - greedy continuations agree token for token up to the first step where optkit's two most
//     likely tokens are within 0.1 nats (a near-tie may fall either way), with log-probabilities
//     as close.
//   node gguf_llama_cpp.mjs NODE_MODULES MODEL.gguf OPTKIT.jsonl GOLDEN.json
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const [modules, gguf, optkitLines, goldenPath] = process.argv.slice(2);
const {getLlama, readGgufFileInfo, LlamaLogLevel} = await import(path.join(modules, 'node-llama-cpp', 'dist', 'index.js'));
const kMeanTolerance = 0.03, kTokenTolerance = 0.5;
const fileTypes = {7: 'Q8_0', 14: 'Q4_K_S', 15: 'Q4_K_M', 16: 'Q5_K_S', 17: 'Q5_K_M', 18: 'Q6_K'};
const ggmlTypes = {0: 'F32', 1: 'F16', 6: 'Q5_0', 7: 'Q5_1', 8: 'Q8_0', 12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K', 30: 'BF16'};
// [values, bytes] of a block of each type (ggml-common.h).
const blocks = {F32: [1, 4], F16: [1, 2], BF16: [1, 2], Q5_0: [32, 22], Q5_1: [32, 24], Q8_0: [32, 34],
                Q4_K: [256, 144], Q5_K: [256, 176], Q6_K: [256, 210]};
const name = path.basename(gguf);
let failures = 0;
const fail = (what) => { console.error(`FAIL ${name}: ${what}`); failures++; };

// Metadata and tensor types, by node-llama-cpp's own GGUF reader.
const info = await readGgufFileInfo(gguf);
// A greedy step whose top two tokens optkit puts closer than this (nats) may go either way. A
// mixture of experts routes on the same small differences, which then reach the logits through
// another expert, so closer calls are forgiven there.
const arch = info.metadata.general.architecture;
const kNearTie = (info.metadata[arch]?.expert_count ?? 0) > 0 ? 0.3 : 0.1;
const goldenFile = JSON.parse(fs.readFileSync(goldenPath, 'utf8'));
if (info.metadata.general.architecture !== goldenFile.architecture)
  fail(`architecture ${info.metadata.general.architecture}, llama.cpp's converter writes ${goldenFile.architecture}`);
const fileType = fileTypes[info.metadata.general.file_type];
const calibrated = info.metadata.quantize?.imatrix !== undefined;
const goldenName = calibrated ? `${fileType} imatrix` : fileType;
const golden = goldenFile.file_types[goldenName];
if (!golden) fail(`${goldenName} has no golden tensors`);
const types = Object.fromEntries(info.tensorInfo.map((t) => [t.name, ggmlTypes[t.ggmlType] ?? `type ${t.ggmlType}`]));
for (const [tensor, expected] of Object.entries(golden ?? {}))
  if (types[tensor] !== expected.type) fail(`${tensor} is ${types[tensor]}, llama-quantize makes it ${expected.type}`);
let identical = 0;
const fd = fs.openSync(gguf, 'r');
for (const t of info.tensorInfo) {
  const [values, bytes] = blocks[types[t.name]] ?? [1, 0];
  const data = Buffer.alloc(t.dimensions.reduce((a, b) => a * Number(b), 1) / values * bytes);
  fs.readSync(fd, data, 0, data.length, Number(t.fileOffset));
  const sha = crypto.createHash('sha256').update(data).digest('hex');
  if (sha === golden?.[t.name]?.sha256) identical++;
  else if (t.name !== 'rope_freqs.weight') fail(`${t.name}: its ${types[t.name]} bytes differ from llama-quantize's`);
}
fs.closeSync(fd);
if (Object.keys(types).length !== Object.keys(golden ?? {}).length)
  fail(`${Object.keys(types).length} tensors, llama-quantize writes ${Object.keys(golden ?? {}).length}`);

// The model in llama.cpp.
const llama = await getLlama({gpu: false, build: 'never', logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: gguf});
// llama.cpp's default F16 KV cache, which optkit keeps for a GGUF too. One thread: a tiny model's
// steps are shorter than the hand-offs between threads, which on a busy 2-core machine cost most of
// a second a token.
const context = await model.createContext({contextSize: 512, threads: 1});
const fullDistribution = {temperature: 1, topK: 0, topP: 1, minP: 0};
const diffs = [];
let worstGreedy = 0, agreed = 0, compared = 0;
// One sequence, cleared between prompts (a generation that ended at llama.cpp's EOS can keep a
// sequence from being handed out again).
const sequence = context.getSequence();
for (const line of fs.readFileSync(optkitLines, 'utf8').split('\n').filter(Boolean)) {
  const c = JSON.parse(line);
  const ids = [model.tokens.bos, ...model.tokenize(c.prompt)];
  if (JSON.stringify(ids) !== JSON.stringify(c.prompt_tokens)) {
    fail(`tokens of ${JSON.stringify(c.prompt.slice(0, 40))}: llama.cpp ${ids} optkit ${c.prompt_tokens}`);
    continue;
  }
  const input = ids.map((t, i) => (i + 1 < ids.length ? [t, {generateNext: {probabilities: true, options: fullDistribution}}] : t));
  const scored = await sequence.controlledEvaluate(input);
  for (let i = 0; i + 1 < ids.length; i++) {
    const lp = Math.log(scored[i].next.probabilities.get(ids[i + 1]) ?? 0);
    const diff = Math.abs(lp - c.prompt_logprobs[i]);
    diffs.push(diff);
    if (!(diff <= kTokenTolerance)) fail(`prompt token ${i + 1}: log p ${lp.toFixed(4)} in llama.cpp, ${c.prompt_logprobs[i].toFixed(4)} in optkit`);
  }
  await sequence.clearHistory();
  const generated = [];
  for await (const r of sequence.evaluateWithMetadata(ids, {confidence: true}, {temperature: 0})) {
    generated.push(r);
    if (generated.length >= c.tokens.length) break;
  }
  for (let k = 0; k < c.tokens.length; k++) {
    compared++;
    if (k >= generated.length || generated[k].token !== c.tokens[k]) { // llama.cpp may stop early (its EOS)
      const theirs = k < generated.length ? generated[k].token : 'end of text';
      if (c.margins[k] >= kNearTie) fail(`greedy step ${k}: llama.cpp ${theirs}, optkit ${c.tokens[k]} (margin ${c.margins[k].toFixed(3)})`);
      break;
    }
    agreed++;
    const diff = Math.abs(Math.log(generated[k].confidence) - c.logprobs[k]);
    worstGreedy = Math.max(worstGreedy, diff);
    if (!(diff <= kTokenTolerance)) fail(`greedy step ${k}: log p ${Math.log(generated[k].confidence).toFixed(4)} in llama.cpp, ${c.logprobs[k].toFixed(4)} in optkit`);
  }
  await sequence.clearHistory();
}
sequence.dispose();
await context.dispose();
await model.dispose();
const mean = diffs.reduce((a, b) => a + b, 0) / Math.max(1, diffs.length);
if (!(diffs.length > 0 && mean <= kMeanTolerance)) fail(`prompt log p differ by ${mean.toFixed(4)} nats on average over ${diffs.length} tokens`);
if (failures > 0) process.exit(1);
const bytes = `${identical}/${info.tensorInfo.length} tensors byte for byte${calibrated ? ', importance matrix' : ''}`;
console.log(`ok   ${name} (${fileType}): llama-quantize's tensor types (${bytes}), same tokens, prompt log p within ` +
            `${mean.toFixed(4)} nats on average (worst ${Math.max(...diffs).toFixed(4)}) over ${diffs.length} tokens, ` +
            `greedy ${agreed}/${compared} tokens agreed within ${worstGreedy.toFixed(4)} nats`);
