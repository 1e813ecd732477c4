// The official `openai` npm package as a real client of `optkit serve-deltas`: it lists models,
// completes, streams chat with include_usage, and sees OpenAI-shaped errors as its own typed
// exceptions. Usage: node openai_client.mjs BASE_URL API_KEY NODE_MODULES
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const [baseUrl, apiKey, nodeModules] = process.argv.slice(2);
const require = createRequire(nodeModules + "/");
const { default: OpenAI } = require("openai");
const client = new OpenAI({ baseURL: baseUrl + "/v1", apiKey, maxRetries: 0, timeout: 120000 });

const models = await client.models.list();
const ids = models.data.map((m) => m.id);
assert.deepEqual(ids, ["tiny-base"]);
assert.equal(models.data[0].object, "model");

const completion = await client.completions.create({
  model: "tiny-base", prompt: "The quick brown fox", max_tokens: 8, temperature: 0, ignore_eos: true,
});
assert.equal(completion.object, "text_completion");
assert.ok(completion.id.startsWith("cmpl-"));
assert.equal(completion.choices[0].finish_reason, "length");
assert.ok(completion.choices[0].text.length > 0);
assert.equal(completion.usage.completion_tokens, 8);
assert.equal(completion.usage.total_tokens, completion.usage.prompt_tokens + 8);

// lm-eval's local-completions loglikelihood request: token ids, echo, one logprob, one token.
const tokenized = await (await fetch(baseUrl + "/tokenize", {
  method: "POST", headers: { Authorization: `Bearer ${apiKey}` },
  body: JSON.stringify({ prompt: "The quick brown fox jumps" }),
})).json();
const scored = await client.completions.create({
  model: "tiny-base", prompt: tokenized.tokens, echo: true, logprobs: 1, max_tokens: 1, temperature: 0, seed: 1234,
});
const lp = scored.choices[0].logprobs;
assert.equal(lp.tokens.length, tokenized.count + 1, "every prompt token and the generated one");
assert.equal(lp.token_logprobs[0], null, "the first prompt token has no logprob");
assert.equal(lp.top_logprobs[0], null);
assert.equal(lp.tokens.join(""), scored.choices[0].text, "echo: the tokens spell the returned text");
for (let i = 1; i < lp.tokens.length; ++i) {
  assert.ok(lp.token_logprobs[i] <= 0 && Number.isFinite(lp.token_logprobs[i]), `logprob ${i}`);
  assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length, "offsets run on");
  const top = Object.values(lp.top_logprobs[i]);
  assert.ok(top.length >= 1 && top.length <= 2 && Math.max(...top) >= lp.token_logprobs[i]);
}
// The generated token is greedy: it is the most likely, as lm-eval's is_greedy reads it.
const last = lp.tokens.length - 1;
assert.equal(Math.max(...Object.values(lp.top_logprobs[last])), lp.token_logprobs[last]);

// Streamed completions carry the same logprobs, chunk by chunk.
const streamedLogprobs = await client.completions.create({
  model: "tiny-base", prompt: "The quick brown fox", max_tokens: 6, temperature: 0, ignore_eos: true, logprobs: 2,
  stream: true,
});
const streamedTokens = [];
for await (const chunk of streamedLogprobs)
  if (chunk.choices[0]?.logprobs) streamedTokens.push(...chunk.choices[0].logprobs.tokens);
const wholeLogprobs = await client.completions.create({
  model: "tiny-base", prompt: "The quick brown fox", max_tokens: 6, temperature: 0, ignore_eos: true, logprobs: 2,
});
assert.deepEqual(streamedTokens, wholeLogprobs.choices[0].logprobs.tokens);
assert.equal(streamedTokens.length, 6);

const messages = [{ role: "user", content: "Write about compilers." }];
const whole = await client.chat.completions.create({
  model: "tiny-base", messages, max_completion_tokens: 12, temperature: 0,
});
assert.equal(whole.object, "chat.completion");
assert.equal(whole.choices[0].message.role, "assistant");

const chatScored = await client.chat.completions.create({
  model: "tiny-base", messages, max_completion_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2,
});
const content_lp = chatScored.choices[0].logprobs.content;
assert.equal(content_lp.length, chatScored.usage.completion_tokens);
for (const entry of content_lp) {
  assert.equal(entry.top_logprobs.length, 2);
  assert.equal(entry.top_logprobs[0].logprob, entry.logprob, "greedy: the chosen token is the most likely");
  assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")]);
}
await assert.rejects(client.chat.completions.create({ model: "tiny-base", messages, top_logprobs: 2 }),
  (e) => e instanceof OpenAI.BadRequestError && /top_logprobs/.test(e.message));

const stream = await client.chat.completions.create({
  model: "tiny-base", messages, max_completion_tokens: 12, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let content = "", finishes = 0, first = true, usage = null, chunkIds = new Set();
for await (const chunk of stream) {
  chunkIds.add(chunk.id);
  assert.equal(chunk.model, "tiny-base");
  if (chunk.choices.length === 0) { usage = chunk.usage; continue; }
  const choice = chunk.choices[0];
  if (first) { assert.equal(choice.delta.role, "assistant"); first = false; }
  content += choice.delta.content ?? "";
  if (choice.finish_reason) finishes += 1;
}
assert.equal(finishes, 1, "exactly one chunk carries finish_reason");
assert.equal(chunkIds.size, 1, "one id across the stream");
assert.ok(usage && usage.completion_tokens > 0, "the include_usage chunk arrives");
assert.equal(content, whole.choices[0].message.content, "streamed and whole greedy texts agree");

// n choices, whole and streamed: the streamed choices, put together by index, are the whole ones.
const several = await client.chat.completions.create({
  model: "tiny-base", messages, max_completion_tokens: 6, temperature: 0.8, seed: 7, n: 3,
});
assert.deepEqual(several.choices.map((c) => c.index), [0, 1, 2]);
const severalStream = await client.chat.completions.create({
  model: "tiny-base", messages, max_completion_tokens: 6, temperature: 0.8, seed: 7, n: 3, stream: true,
});
const byIndex = ["", "", ""];
for await (const chunk of severalStream)
  for (const choice of chunk.choices) byIndex[choice.index] += choice.delta.content ?? "";
assert.deepEqual(byIndex, several.choices.map((c) => c.message.content));

await assert.rejects(client.completions.create({ model: "no-such-model", prompt: "x" }),
  (e) => e instanceof OpenAI.NotFoundError && /tiny-base/.test(e.message));
await assert.rejects(client.completions.create({ model: "tiny-base", prompt: "x", temperature: "hot" }),
  (e) => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message));
const stranger = new OpenAI({ baseURL: baseUrl + "/v1", apiKey: "wrong", maxRetries: 0 });
await assert.rejects(stranger.models.list(), (e) => e instanceof OpenAI.AuthenticationError);

// A client that walks away mid-stream: the server goes on serving.
const controller = new AbortController();
const long = await client.completions.create(
  { model: "tiny-base", prompt: "Once", max_tokens: 500, ignore_eos: true, stream: true },
  { signal: controller.signal });
let seen = 0;
try {
  for await (const chunk of long) { if (++seen === 3) controller.abort(); }
} catch (e) { assert.ok(e.name === "APIUserAbortError" || e.name === "AbortError", e.name); }
const after = await client.completions.create({ model: "tiny-base", prompt: "Again", max_tokens: 2 });
assert.equal(after.choices.length, 1);
const version = JSON.parse(readFileSync(nodeModules + "/openai/package.json", "utf8")).version;
console.log(`openai@${version}: models, completions, echo + logprobs, chat logprobs, chat stream, n choices, errors, abort: ok`);
