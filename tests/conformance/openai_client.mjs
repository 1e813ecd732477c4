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

const messages = [{ role: "user", content: "Write about compilers." }];
const whole = await client.chat.completions.create({
  model: "tiny-base", messages, max_completion_tokens: 12, temperature: 0,
});
assert.equal(whole.object, "chat.completion");
assert.equal(whole.choices[0].message.role, "assistant");

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
console.log(`openai@${version}: models, completions, chat stream, errors, abort: ok`);
