import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { deferred, emit } from '../../test/fakeEngine';
import type { Final, SendResult } from '../types';
import { Chat, emptyPromptError, readingPromptError, replyLimit, replyLimitError } from './chat.svelte';
import { documents } from './documents.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const send = vi.mocked(engine.send);
const stop = vi.mocked(engine.stop);

function final(id: string, over: Partial<Final> = {}): Final {
  return {
    id,
    finishReason: 'stop',
    text: '',
    promptTokens: 12,
    reusedTokens: 0,
    genTokens: 3,
    ttftMs: 42,
    prefillTokPerSec: 300,
    decodeTokPerSec: 25.5,
    ...over,
  };
}

let chat: Chat;
let off: () => void;

beforeEach(() => {
  off?.();
  vi.clearAllMocks();
  chat = new Chat();
  off = chat.connect();
});

async function ask(text: string): Promise<void> {
  chat.setDraft(text);
  await chat.submit();
}

describe('chat store', () => {
  it('keeps the question while an attached document is still being read', async () => {
    const reading = { id: 'd1', name: 'notes.txt', kind: '', size: 10, state: 'reading', progress: 0.3, pages: 0, lines: 0, tokens: 0, whole: false };
    documents.items = [reading];
    try {
      await ask('What does it say?');
      expect(send).not.toHaveBeenCalled();
      expect(chat.promptError).toBe(readingPromptError);
      expect(chat.draft).toBe('What does it say?');
      expect(chat.turns).toEqual([]);
      documents.items = [{ ...reading, state: 'ready' }];
      send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 1 });
      await ask('What does it say?');
      expect(send).toHaveBeenCalledWith([{ role: 'user', content: 'What does it say?' }], 0, 0, ['d1'], false, '');
      expect(chat.promptError).toBeNull();
    } finally {
      documents.items = [];
    }
  });
  it('keeps events that arrive before Send returns and applies them to the reply', async () => {
    const answer = deferred<SendResult>();
    send.mockReturnValueOnce(answer.promise);
    chat.setDraft('Hello');
    const sent = chat.submit();
    expect(chat.turns.map((t) => [t.role, t.state])).toEqual([
      ['user', 'done'],
      ['assistant', 'waiting'],
    ]);
    emit('chat:progress', { id: 'r1', prefilled: 4, promptTokens: 8 });
    emit('chat:delta', { id: 'r1', text: 'Hi' });
    emit('chat:delta', { id: 'r1', text: ' there' });
    expect(chat.turns[1]?.content).toBe(''); // not known yet whose they are
    answer.resolve({ replyId: 'r1', conversationId: 5 });
    await sent;
    const reply = chat.turns[1];
    expect(reply?.content).toBe('Hi there');
    expect(reply?.deltas).toBe(2);
    expect(reply?.state).toBe('streaming');
    emit('chat:delta', { id: 'r1', text: '!' });
    emit('chat:final', final('r1', { text: 'Hi there!' }));
    expect(reply?.state).toBe('done');
    expect(reply?.content).toBe('Hi there!');
    expect(reply?.final?.ttftMs).toBe(42);
    expect(reply?.final?.decodeTokPerSec).toBe(25.5);
    expect(chat.streaming).toBeUndefined();
  });

  it('shows the prefill progress until the first token', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 1 });
    await ask('Long prompt');
    emit('chat:progress', { id: 'r1', prefilled: 256, promptTokens: 1024 });
    expect(chat.turns[1]?.prefill).toEqual({ done: 256, total: 1024 });
    emit('chat:delta', { id: 'r1', text: 'A' });
    expect(chat.turns[1]?.prefill).toBeUndefined();
  });

  it('sends the conversation id of the previous answer, and New chat starts over', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 7 });
    await ask('First');
    expect(send).toHaveBeenLastCalledWith([{ role: 'user', content: 'First' }], 0, 0, [], false, '');
    emit('chat:delta', { id: 'r1', text: 'One' });
    emit('chat:final', final('r1', { text: 'One' }));
    expect(chat.conversationId).toBe(7);

    send.mockResolvedValueOnce({ replyId: 'r2', conversationId: 7 });
    await ask('Second');
    expect(send).toHaveBeenLastCalledWith(
      [
        { role: 'user', content: 'First' },
        { role: 'assistant', content: 'One' },
        { role: 'user', content: 'Second' },
      ],
      0,
      7,
      [],
      false,
      '',
    );
    emit('chat:final', final('r2', { text: 'Two' }));

    chat.newChat();
    expect(chat.turns).toEqual([]);
    expect(chat.conversationId).toBe(0);
    send.mockResolvedValueOnce({ replyId: 'r3', conversationId: 8 });
    await ask('Third');
    expect(send).toHaveBeenLastCalledWith([{ role: 'user', content: 'Third' }], 0, 0, [], false, '');
    expect(chat.conversationId).toBe(8);
  });

  it('stops the reply and keeps what streamed', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 1 });
    await ask('Tell a story');
    emit('chat:delta', { id: 'r1', text: 'Once upon' });
    await chat.stop();
    expect(stop).toHaveBeenCalledWith('r1');
    emit('chat:final', final('r1', { finishReason: 'cancelled', text: 'Once upon', genTokens: 2 }));
    const reply = chat.turns[1];
    expect(reply?.state).toBe('stopped');
    expect(reply?.content).toBe('Once upon');
    expect(chat.streaming).toBeUndefined();
    // A late delta does not reopen it.
    emit('chat:delta', { id: 'r1', text: ' a time' });
    expect(reply?.content).toBe('Once upon');
  });

  it('stops a reply whose id is not known yet as soon as it is', async () => {
    const answer = deferred<SendResult>();
    send.mockReturnValueOnce(answer.promise);
    chat.setDraft('Hi');
    const sent = chat.submit();
    await chat.stop();
    expect(stop).not.toHaveBeenCalled();
    answer.resolve({ replyId: 'r9', conversationId: 1 });
    await sent;
    expect(stop).toHaveBeenCalledWith('r9');
  });

  it('refuses an empty prompt without sending', async () => {
    await ask('   \n ');
    expect(chat.promptError).toBe(emptyPromptError);
    expect(send).not.toHaveBeenCalled();
    expect(chat.turns).toEqual([]);
    chat.setDraft('now');
    expect(chat.promptError).toBeNull();
  });

  it('marks the reply failed when Send fails, and leaves it out of the next request', async () => {
    send.mockRejectedValueOnce(new Error('no model is loaded'));
    await ask('Hi');
    expect(chat.turns[1]?.state).toBe('error');
    expect(chat.turns[1]?.error).toBe('no model is loaded');
    send.mockResolvedValueOnce({ replyId: 'r2', conversationId: 3 });
    await ask('Again');
    expect(send).toHaveBeenLastCalledWith(
      [
        { role: 'user', content: 'Hi' },
        { role: 'user', content: 'Again' },
      ],
      0,
      0,
      [],
      false,
      '',
    );
  });

  it('shows an engine error of the final event', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 1 });
    await ask('Hi');
    emit('chat:final', final('r1', { finishReason: 'error', error: 'out of memory', genTokens: 0 }));
    expect(chat.turns[1]?.state).toBe('error');
    expect(chat.turns[1]?.error).toBe('out of memory');
  });

  it('drops the events of a chat that New chat cleared', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 1 });
    await ask('Hi');
    chat.newChat();
    expect(stop).toHaveBeenCalledWith('r1');
    emit('chat:delta', { id: 'r1', text: 'late' });
    send.mockResolvedValueOnce({ replyId: 'r2', conversationId: 2 });
    await ask('Fresh');
    expect(chat.turns.map((t) => t.content)).toEqual(['Fresh', '']);
  });

  it('restores a kept conversation and continues it', async () => {
    chat.restore({
      id: 12,
      title: 'Kettles',
      model: 'Tiny',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'A haiku about a kettle' },
        {
          role: 'assistant',
          content: 'Steam sings',
          stats: { finishReason: 'stop', promptTokens: 9, genTokens: 3, ttftMs: 80, prefillTokPerSec: 100, decodeTokPerSec: 12 },
        },
      ],
    });
    expect(chat.conversationId).toBe(12);
    expect(chat.turns.map((t) => [t.role, t.state])).toEqual([
      ['user', 'done'],
      ['assistant', 'done'],
    ]);
    expect(chat.turns[1]?.final?.decodeTokPerSec).toBe(12);
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 12 });
    await ask('Another');
    expect(send).toHaveBeenLastCalledWith(
      [
        { role: 'user', content: 'A haiku about a kettle' },
        { role: 'assistant', content: 'Steam sings' },
        { role: 'user', content: 'Another' },
      ],
      0,
      12,
      [],
      false,
      '',
    );
  });

  it('regenerates the last reply in place of the old one', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 4 });
    await ask('First');
    emit('chat:final', final('r1', { text: 'One' }));
    send.mockResolvedValueOnce({ replyId: 'r2', conversationId: 4 });
    await ask('Second');
    expect(chat.canRegenerate).toBe(false); // the reply runs
    emit('chat:final', final('r2', { text: 'Two' }));
    expect(chat.canRegenerate).toBe(true);

    send.mockResolvedValueOnce({ replyId: 'r3', conversationId: 4 });
    await chat.regenerate();
    expect(send).toHaveBeenLastCalledWith(
      [
        { role: 'user', content: 'First' },
        { role: 'assistant', content: 'One' },
        { role: 'user', content: 'Second' },
      ],
      0,
      4,
      [],
      true,
      '',
    );
    expect(chat.turns.map((t) => [t.role, t.content, t.state])).toEqual([
      ['user', 'First', 'done'],
      ['assistant', 'One', 'done'],
      ['user', 'Second', 'done'],
      ['assistant', '', 'waiting'],
    ]);
    emit('chat:final', final('r3', { text: 'Two again' }));
    expect(chat.turns[3]?.content).toBe('Two again');
  });

  it('regenerates a reply that failed', async () => {
    send.mockRejectedValueOnce(new Error('the engine is busy'));
    await ask('Hi');
    expect(chat.canRegenerate).toBe(true);
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 2 });
    await chat.regenerate();
    expect(send).toHaveBeenLastCalledWith([{ role: 'user', content: 'Hi' }], 0, 0, [], true, '');
    expect(chat.turns.map((t) => [t.role, t.state])).toEqual([
      ['user', 'done'],
      ['assistant', 'waiting'],
    ]);
  });

  it('sends an edited last question in place of the old exchange', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 9 });
    await ask('Frist');
    emit('chat:final', final('r1', { text: 'Huh?' }));
    send.mockResolvedValueOnce({ replyId: 'r2', conversationId: 9 });
    await chat.editLast('  First?  ');
    expect(send).toHaveBeenLastCalledWith([{ role: 'user', content: 'First?' }], 0, 9, [], true, '');
    expect(chat.turns.map((t) => [t.role, t.content])).toEqual([
      ['user', 'First?'],
      ['assistant', ''],
    ]);
    // An empty edit is refused and changes nothing.
    emit('chat:final', final('r2', { text: 'Yes.' }));
    await chat.editLast('   ');
    expect(chat.promptError).toBe(emptyPromptError);
    expect(send).toHaveBeenCalledTimes(2);
    expect(chat.turns.map((t) => t.content)).toEqual(['First?', 'Yes.']);
  });

  it("sends the chat's reply limit, and New chat forgets it", async () => {
    chat.setReplyLimit('12');
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 1 });
    await ask('Short, please');
    expect(send).toHaveBeenLastCalledWith([{ role: 'user', content: 'Short, please' }], 12, 0, [], false, '');
    emit('chat:final', final('r1', { text: 'Ok', finishReason: 'length', genTokens: 12, maxTokens: 12 }));

    chat.setReplyLimit('0'); // no limit
    send.mockResolvedValueOnce({ replyId: 'r2', conversationId: 1 });
    await chat.regenerate();
    expect(send.mock.lastCall?.[1]).toBe(engine.noReplyLimit);

    chat.setReplyLimit('lots');
    emit('chat:final', final('r2', { text: 'Ok' }));
    await ask('More');
    expect(chat.promptError).toBe(replyLimitError);
    expect(chat.draft).toBe('More');
    expect(send).toHaveBeenCalledTimes(2);
    chat.setReplyLimit('64');
    expect(chat.promptError).toBeNull();

    chat.newChat();
    expect(chat.replyLimitText).toBe('');
    send.mockResolvedValueOnce({ replyId: 'r3', conversationId: 2 });
    await ask('Fresh');
    expect(send.mock.lastCall?.[1]).toBe(0); // the Settings' limit
  });
});

describe('replyLimit', () => {
  it('reads the field: empty is the Settings, 0 is none, else tokens', () => {
    expect(replyLimit('')).toBe(0);
    expect(replyLimit('  ')).toBe(0);
    expect(replyLimit('0')).toBe(engine.noReplyLimit);
    expect(replyLimit(' 256 ')).toBe(256);
    for (const bad of ['-5', '1.5', '1e3', 'ten', '99999999999999999999']) expect(replyLimit(bad)).toBeNull();
  });
});

describe('a reasoning model', () => {
  it('streams the thinking apart from the answer and sends the switch', async () => {
    send.mockResolvedValueOnce({ replyId: 'r1', conversationId: 4 });
    chat.setThinking('off');
    await ask('Hi');
    expect(send).toHaveBeenLastCalledWith([{ role: 'user', content: 'Hi' }], 0, 0, [], false, 'off');
    emit('chat:delta', { id: 'r1', text: '', reasoning: 'They greet' });
    emit('chat:delta', { id: 'r1', text: '', reasoning: ' me.' });
    expect(chat.turns[1]?.reasoning).toBe('They greet me.');
    expect(chat.turns[1]?.content).toBe('');
    emit('chat:delta', { id: 'r1', text: 'Hello!' });
    expect(chat.turns[1]?.thinkingMs).toBeGreaterThanOrEqual(0); // shown until the final event says
    emit('chat:final', final('r1', { text: 'Hello!', reasoning: 'They greet me.', thinkingMs: 1200 }));
    expect(chat.turns[1]).toMatchObject({ content: 'Hello!', reasoning: 'They greet me.', state: 'done', answerOnly: false });
    expect(chat.turns[1]?.final?.thinkingMs).toBe(1200);
    // The model sees the answers, not the thinking.
    send.mockResolvedValueOnce({ replyId: 'r2', conversationId: 4 });
    await ask('More');
    expect(send.mock.calls.at(-1)?.[0]).toEqual([
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello!' },
      { role: 'user', content: 'More' },
    ]);
    chat.newChat();
    expect(chat.thinking).toBe('');
  });

  it("shows only a quick action's answer, and keeps reasoning restored from the history", async () => {
    await chat.startNew(async () => ({ replyId: 'q1', conversationId: 5, prompt: 'Summarize: x', name: 'Summarize' }));
    expect(chat.turns[1]?.answerOnly).toBe(true);
    chat.restore({
      id: 6,
      title: 'old',
      model: 'm',
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello!', reasoning: 'A greeting.', stats: { finishReason: 'stop', thinkingMs: 800, promptTokens: 0, genTokens: 5, ttftMs: 1, prefillTokPerSec: 0, decodeTokPerSec: 1 } },
      ],
    });
    expect(chat.turns[1]).toMatchObject({ reasoning: 'A greeting.', answerOnly: false });
    expect(chat.turns[1]?.final?.thinkingMs).toBe(800);
  });
});
