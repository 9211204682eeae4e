// The official openai npm package, a client Nibble did not write, against
// `nibble serve`. TestServeOpenAINode (app/cli/cmd_serve_test.go) starts the
// server and sets NIBBLE_BASE_URL (http://127.0.0.1:PORT/v1), NIBBLE_TOKEN
// and NIBBLE_MODEL (the loaded model's id).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';

const baseURL = process.env.NIBBLE_BASE_URL;
const apiKey = process.env.NIBBLE_TOKEN;
const model = process.env.NIBBLE_MODEL;
assert.ok(baseURL && apiKey && model, 'NIBBLE_BASE_URL, NIBBLE_TOKEN and NIBBLE_MODEL must be set');

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const hello = [{ role: 'user', content: 'Hello' }];

// The server's counters (GET /v1/nibble/stats, loopback only).
async function stats() {
  const res = await fetch(`${baseURL}/nibble/stats`, { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.equal(res.status, 200);
  return res.json();
}

test('lists the loaded model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  assert.equal(m.object, 'model');
});

test('a chat completion', async () => {
  const c = await client.chat.completions.create({ model, messages: hello, max_tokens: 8, temperature: 0, ignore_eos: true });
  assert.equal(c.object, 'chat.completion');
  assert.equal(c.model, model);
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].message.role, 'assistant');
  assert.ok(c.choices[0].message.content.length > 0);
  assert.equal(c.choices[0].finish_reason, 'length');
  assert.equal(c.usage.completion_tokens, 8);
  assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + 8);
});

test('a streamed chat completion matches the plain one', async () => {
  const params = { model, messages: hello, max_tokens: 8, temperature: 0, ignore_eos: true };
  const plain = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      text += ch.delta?.content ?? '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.ok(chunks >= 3, `${chunks} chunks`);
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 8);

  // The SDK's stream helper assembles the same message from the chunks.
  const final = await client.chat.completions.stream(params).finalChatCompletion();
  assert.equal(final.choices[0].message.content, plain.choices[0].message.content);
  assert.equal(final.choices[0].message.role, 'assistant');
});

test('a plain completion', async () => {
  const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5, ignore_eos: true });
  assert.equal(c.object, 'text_completion');
  assert.ok(c.choices[0].text.length > 0);
  assert.equal(c.choices[0].finish_reason, 'length');
  assert.equal(c.usage.completion_tokens, 5);
});

test('a bad request is a 400 with a useful message', async () => {
  await assert.rejects(client.chat.completions.create({ model, messages: [] }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.type, 'invalid_request_error');
    assert.equal(err.param, 'messages');
    assert.match(err.message, /messages must not be empty/);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages: [{ role: 'wizard', content: 'hi' }] }), (err) => {
    assert.equal(err.status, 400);
    assert.match(err.message, /"wizard" is not supported: use system, developer, user or assistant/);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages: hello, max_tokens: 100000 }), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.code, 'context_length_exceeded');
    assert.match(err.message, /100000 more were asked for, but the context budget is \d+/);
    return true;
  });
});

test('an unknown model is a 404, a wrong key a 401', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: hello }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, String(err));
    assert.equal(err.code, 'model_not_found');
    assert.match(err.message, new RegExp(`the loaded model is "${model}"`));
    return true;
  });
  const stranger = new OpenAI({ baseURL, apiKey: 'not-the-token', maxRetries: 0 });
  await assert.rejects(stranger.models.list(), (err) => err instanceof OpenAI.AuthenticationError && err.status === 401);
});

test('aborting mid-stream stops the generation', async (t) => {
  const before = await stats();
  const ac = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages: [{ role: 'user', content: 'Tell me a long story' }], max_tokens: 3000, ignore_eos: true, stream: true },
    { signal: ac.signal },
  );
  let pieces = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) pieces++;
      if (pieces === 5) ac.abort();
    }
  } catch (err) {
    if (!(err instanceof OpenAI.APIUserAbortError) && err?.name !== 'AbortError') throw err;
  }
  assert.ok(pieces >= 5);
  let after = before;
  for (let i = 0; i < 400 && !(after.cancelled > before.cancelled && after.active === 0); i++) {
    await sleep(25);
    after = await stats();
  }
  assert.equal(after.cancelled, before.cancelled + 1, JSON.stringify(after));
  assert.equal(after.active, 0);
  assert.equal(after.completed, before.completed, 'the aborted request did not complete');
  const generated = after.cancelled_completion_tokens - before.cancelled_completion_tokens;
  assert.ok(generated >= 5 && generated < 1000, `generated ${generated} of 3000 tokens`);
  t.diagnostic(`the server cancelled the generation after ${generated} of 3000 tokens`);
});
