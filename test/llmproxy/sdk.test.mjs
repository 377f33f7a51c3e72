// The official Anthropic and OpenAI SDKs, pointed at toolgate's LLM proxy
// (PROXY_URL) in front of a fake provider that replays spec-shaped
// fixtures. The fake picks the response by the first user message: "text",
// "tool" (send_email only), "parallel" (get_weather and send_email),
// "error", "ratelimit", "disconnect". toolgate blocks send_email. The SDKs'
// own parsers and stream accumulators judge every rewritten response, and
// a small agent loop checks a blocked call never reaches the tool runner.
// Run by test/e2e (TestLLMProxySDKs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const PROXY = process.env.PROXY_URL;
if (!PROXY) throw new Error('PROXY_URL is not set');
const BLOCKED = "[toolgate] Tool 'send_email' blocked by access_control.deny";

const anthropic = new Anthropic({ apiKey: 'sk-ant-e2e-SECRET', baseURL: PROXY, maxRetries: 0 });
const openai = new OpenAI({ apiKey: 'sk-e2e-SECRET', baseURL: PROXY + '/v1', maxRetries: 0 });

const aTools = [
  { name: 'get_weather', description: 'Get the weather for a location', input_schema: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } },
  { name: 'send_email', description: 'Send an email', input_schema: { type: 'object', properties: { to: { type: 'string' }, body: { type: 'string' } } } },
];
const cTools = aTools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } }));
const rTools = aTools.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.input_schema }));

// The agent's tools: what ran is recorded.
function runner() {
  const ran = [];
  return { ran, run: (name, args) => { ran.push(name); return name === 'get_weather' ? `sunny in ${args.location}` : 'sent'; } };
}

// ---------- Anthropic ----------

async function aCreate(scenario, stream, messages) {
  const params = { model: 'claude-e2e', max_tokens: 256, tools: aTools, messages: messages ?? [{ role: 'user', content: scenario }] };
  if (!stream) return anthropic.messages.create(params);
  const s = anthropic.messages.stream(params);
  const seen = [];
  s.on('streamEvent', (e) => seen.push(e));
  const msg = await s.finalMessage();
  return Object.assign(msg, { _events: seen });
}

for (const stream of [false, true]) {
  const mode = stream ? 'stream' : 'buffered';
  test(`anthropic ${mode}: text only passes`, async () => {
    const m = await aCreate('text', stream);
    assert.equal(m.stop_reason, 'end_turn');
    assert.equal(m.content[0].text, 'Hello! How can I help you today?');
  });
  test(`anthropic ${mode}: the only call blocked becomes text, end_turn`, async () => {
    const m = await aCreate('tool', stream);
    assert.equal(m.stop_reason, 'end_turn');
    assert.deepEqual(m.content.map((b) => b.type), ['text', 'text']);
    assert.equal(m.content[0].text, "I'll send that email for you.");
    assert.ok(m.content[1].text.startsWith(BLOCKED), m.content[1].text);
    if (stream) assert.ok(!m._events.some((e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use'));
  });
  test(`anthropic ${mode}: one of two calls blocked, stop_reason stays tool_use`, async () => {
    const m = await aCreate('parallel', stream);
    assert.equal(m.stop_reason, 'tool_use');
    assert.deepEqual(m.content.map((b) => b.type), ['text', 'tool_use', 'text']);
    assert.equal(m.content[1].name, 'get_weather');
    assert.deepEqual(m.content[1].input, { location: 'San Francisco, CA' });
    assert.ok(m.content[2].text.startsWith(BLOCKED));
  });
  test(`anthropic ${mode}: the agent loop never runs a blocked call`, async () => {
    const r = runner();
    const messages = [{ role: 'user', content: 'parallel' }];
    for (let turn = 0; turn < 4; turn++) {
      const m = await aCreate(null, stream, messages);
      messages.push({ role: 'assistant', content: m.content });
      const uses = m.content.filter((b) => b.type === 'tool_use');
      if (m.stop_reason !== 'tool_use' || uses.length === 0) break;
      messages.push({ role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: r.run(u.name, u.input) })) });
    }
    assert.deepEqual(r.ran, ['get_weather']);
    assert.equal(messages.at(-1).role, 'assistant');
  });
  test(`anthropic ${mode}: a provider error reaches the SDK as an API error`, async () => {
    await assert.rejects(aCreate('error', stream), (e) => e instanceof Anthropic.BadRequestError && e.status === 400);
  });
  test(`anthropic ${mode}: 429 with retry-after reaches the SDK`, async () => {
    await assert.rejects(aCreate('ratelimit', stream), (e) => e instanceof Anthropic.RateLimitError && e.headers.get('retry-after') === '0');
  });
}

test('anthropic stream: a provider that disconnects mid-call delivers no tool call', async () => {
  const s = anthropic.messages.stream({ model: 'm', max_tokens: 10, tools: aTools, messages: [{ role: 'user', content: 'disconnect' }] });
  const seen = [];
  s.on('streamEvent', (e) => seen.push(e));
  await s.finalMessage().catch(() => {});
  assert.ok(!seen.some((e) => e.type === 'content_block_start' && e.content_block.name === 'send_email'));
  assert.ok(!JSON.stringify(seen).includes('bob@example.com'));
});

test('anthropic stream: a client that disconnects mid-stream is fine', async () => {
  const s = anthropic.messages.stream({ model: 'm', max_tokens: 10, tools: aTools, messages: [{ role: 'user', content: 'parallel' }] });
  // The abort rejects the stream's promises; they are handled, not awaited
  // (after an abort the SDK does not always settle done()).
  s.done().catch(() => {});
  s.finalMessage().catch(() => {});
  const outcome = await new Promise((resolve) => {
    s.on('text', () => { s.abort(); resolve('text'); });
    s.on('error', (e) => resolve(`error: ${e}`));
    s.on('end', () => resolve('end'));
  });
  assert.equal(outcome, 'text');
  const m = await aCreate('text', false);
  assert.equal(m.content[0].text, 'Hello! How can I help you today?');
});

// ---------- OpenAI Chat Completions ----------

async function cCreate(scenario, stream, messages) {
  const params = { model: 'gpt-4o', tools: cTools, messages: messages ?? [{ role: 'user', content: scenario }] };
  if (!stream) return openai.chat.completions.create(params);
  const s = openai.chat.completions.stream(params);
  const chunks = [];
  s.on('chunk', (c) => chunks.push(c));
  const c = await s.finalChatCompletion();
  return Object.assign(c, { _chunks: chunks });
}

for (const stream of [false, true]) {
  const mode = stream ? 'stream' : 'buffered';
  test(`openai chat ${mode}: text only passes`, async () => {
    const c = await cCreate('text', stream);
    assert.equal(c.choices[0].finish_reason, 'stop');
    assert.equal(c.choices[0].message.content, 'Hello! How can I help you today?');
  });
  test(`openai chat ${mode}: the only call blocked: tool_calls removed, finish_reason stop`, async () => {
    const c = await cCreate('tool', stream);
    const ch = c.choices[0];
    assert.equal(ch.finish_reason, 'stop');
    assert.ok(!ch.message.tool_calls || ch.message.tool_calls.length === 0, JSON.stringify(ch.message));
    assert.ok(ch.message.content.startsWith(BLOCKED), ch.message.content);
  });
  test(`openai chat ${mode}: one of two calls blocked, finish_reason stays tool_calls`, async () => {
    const c = await cCreate('parallel', stream);
    const ch = c.choices[0];
    assert.equal(ch.finish_reason, 'tool_calls');
    assert.deepEqual(ch.message.tool_calls.map((t) => t.function.name), ['get_weather']);
    assert.deepEqual(JSON.parse(ch.message.tool_calls[0].function.arguments), { location: 'San Francisco, CA' });
    assert.ok(ch.message.content.includes(BLOCKED));
  });
  test(`openai chat ${mode}: the agent loop never runs a blocked call`, async () => {
    const r = runner();
    const messages = [{ role: 'user', content: 'parallel' }];
    for (let turn = 0; turn < 4; turn++) {
      const c = await cCreate(null, stream, messages);
      const msg = c.choices[0].message;
      messages.push({ role: 'assistant', content: msg.content, tool_calls: msg.tool_calls?.length ? msg.tool_calls : undefined });
      if (c.choices[0].finish_reason !== 'tool_calls') break;
      for (const tc of msg.tool_calls) messages.push({ role: 'tool', tool_call_id: tc.id, content: r.run(tc.function.name, JSON.parse(tc.function.arguments)) });
    }
    assert.deepEqual(r.ran, ['get_weather']);
  });
  test(`openai chat ${mode}: errors and 429 reach the SDK`, async () => {
    await assert.rejects(cCreate('error', stream), (e) => e instanceof OpenAI.BadRequestError);
    await assert.rejects(cCreate('ratelimit', stream), (e) => e instanceof OpenAI.RateLimitError && e.headers.get('retry-after') === '0');
  });
}

test('openai chat stream: a provider that disconnects mid-call delivers no tool call', async () => {
  const s = await openai.chat.completions.create({ model: 'm', tools: cTools, stream: true, messages: [{ role: 'user', content: 'disconnect' }] });
  const seen = [];
  try { for await (const c of s) seen.push(c); } catch {}
  assert.ok(!JSON.stringify(seen).includes('send_email'));
});

// ---------- OpenAI Responses ----------

async function rCreate(scenario, stream, input) {
  const params = { model: 'gpt-4.1', tools: rTools, input: input ?? scenario };
  if (!stream) return openai.responses.create(params);
  const s = openai.responses.stream(params);
  const events = [];
  s.on('event', (e) => events.push(e));
  const resp = await s.finalResponse();
  return Object.assign(resp, { _events: events });
}

for (const stream of [false, true]) {
  const mode = stream ? 'stream' : 'buffered';
  test(`openai responses ${mode}: text only passes`, async () => {
    const r = await rCreate('text', stream);
    assert.equal(r.output_text, 'Hello! How can I help you today?');
  });
  test(`openai responses ${mode}: the only call blocked becomes a message`, async () => {
    const r = await rCreate('tool', stream);
    assert.deepEqual(r.output.map((o) => o.type), ['message', 'message']);
    assert.ok(r.output_text.includes(BLOCKED), r.output_text);
    if (stream) assert.ok(!r._events.some((e) => e.item?.type === 'function_call'));
  });
  test(`openai responses ${mode}: one of two calls blocked`, async () => {
    const r = await rCreate('parallel', stream);
    assert.deepEqual(r.output.map((o) => o.type), ['function_call', 'message']);
    assert.equal(r.output[0].name, 'get_weather');
    assert.ok(r.output_text.includes(BLOCKED));
  });
  test(`openai responses ${mode}: the agent loop never runs a blocked call`, async () => {
    const run = runner();
    const input = [{ role: 'user', content: 'parallel' }];
    for (let turn = 0; turn < 4; turn++) {
      const r = await rCreate(null, stream, input);
      const calls = r.output.filter((o) => o.type === 'function_call');
      input.push(...r.output.map(({ parsed_arguments, ...o }) => o));
      if (calls.length === 0) break;
      for (const c of calls) input.push({ type: 'function_call_output', call_id: c.call_id, output: run.run(c.name, JSON.parse(c.arguments)) });
    }
    assert.deepEqual(run.ran, ['get_weather']);
  });
  test(`openai responses ${mode}: errors and 429 reach the SDK`, async () => {
    await assert.rejects(rCreate('error', stream), (e) => e instanceof OpenAI.BadRequestError);
    await assert.rejects(rCreate('ratelimit', stream), (e) => e instanceof OpenAI.RateLimitError);
  });
}
