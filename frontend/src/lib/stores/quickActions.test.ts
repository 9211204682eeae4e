import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { deferred, emit, settings as settingsFixture } from '../../test/fakeEngine';
import type { QuickActionResult, Settings } from '../types';
import { chat } from './chat.svelte';
import { checkActions, defaultActions, placeholder, QuickActions } from './quickActions.svelte';
import { settings } from './settings.svelte';
import { ui } from './ui.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const run = vi.mocked(engine.runQuickAction);
const clipboard = vi.mocked(engine.clipboardText);

/** saved are saved settings with the default quick actions. */
function saved(over: Partial<Settings> = {}): Settings {
  return settingsFixture({ quickActions: defaultActions.map((a) => ({ ...a })), ...over });
}

let qa: QuickActions;
let off: () => void;
let offChat: () => void;

beforeEach(() => {
  off?.();
  offChat?.();
  vi.clearAllMocks();
  chat.newChat();
  offChat = chat.connect();
  settings.saved = saved();
  qa = new QuickActions();
  off = qa.connect();
  ui.show('history');
});

const result = (over: Partial<QuickActionResult> = {}): QuickActionResult => ({
  replyId: 'r7',
  conversationId: 3,
  name: 'Explain',
  prompt: 'Explain the following in simple terms:\n\nE = mc²',
  ...over,
});

describe('quick actions store', () => {
  it('lists the actions in force', () => {
    expect(qa.actions.map((a) => a.name)).toEqual(['Summarize', 'Explain', 'Fix grammar', 'Translate to English', 'Draft a reply']);
  });

  it('runs an action on the clipboard and streams the answer in a new chat', async () => {
    chat.turns.push({ key: 99, role: 'user', content: 'an older chat', state: 'done', deltas: 0 });
    clipboard.mockResolvedValueOnce('E = mc²');
    const started = deferred<QuickActionResult>();
    run.mockReturnValueOnce(started.promise);
    const running = qa.run('Explain');
    expect(qa.running).toBe('Explain');
    expect(ui.tab).toBe('chat');
    await vi.waitFor(() => expect(run).toHaveBeenCalledWith('Explain', 'E = mc²'));
    // The answer's first piece can beat RunQuickAction's return.
    emit('chat:delta', { id: 'r7', text: 'Energy' });
    started.resolve(result());
    await running;
    expect(qa.running).toBeNull();
    expect(qa.error).toBeNull();
    expect(chat.title).toBe('Explain');
    expect(chat.conversationId).toBe(3);
    expect(chat.turns.map((t) => [t.role, t.content, t.state])).toEqual([
      ['user', 'Explain the following in simple terms:\n\nE = mc²', 'done'],
      ['assistant', 'Energy', 'streaming'],
    ]);
    emit('chat:delta', { id: 'r7', text: ' and mass' });
    emit('chat:final', { id: 'r7', finishReason: 'stop', text: 'Energy and mass', promptTokens: 20, reusedTokens: 0, genTokens: 3, ttftMs: 5, prefillTokPerSec: 1, decodeTokPerSec: 1 });
    expect(chat.turns[1]?.content).toBe('Energy and mass');
    expect(chat.turns[1]?.state).toBe('done');
  });

  it('says the clipboard is empty without asking the engine', async () => {
    clipboard.mockResolvedValueOnce('  \n ');
    await qa.run('Summarize');
    expect(run).not.toHaveBeenCalled();
    expect(qa.error).toMatch(/^Summarize: The clipboard has no text/);
  });

  it('keeps the chat on screen when the engine refuses, and says why', async () => {
    chat.turns.push({ key: 98, role: 'user', content: 'keep me', state: 'done', deltas: 0 });
    run.mockRejectedValueOnce(new Error("the clipboard's text is too long for \"Summarize\": it comes to 5000 tokens"));
    await qa.run('Summarize', 'x'.repeat(20000));
    expect(qa.error).toBe('Summarize: The clipboard\'s text is too long for "Summarize": it comes to 5000 tokens');
    expect(chat.turns.map((t) => t.content)).toEqual(['keep me']);
  });

  it('runs what the status item asks for, on the text it read', async () => {
    run.mockResolvedValueOnce(result({ name: 'Fix grammar', prompt: 'Fix: teh cat' }));
    emit('quickaction:run', { name: 'Fix grammar', text: 'teh cat' });
    await vi.waitFor(() => expect(chat.title).toBe('Fix grammar'));
    expect(run).toHaveBeenCalledWith('Fix grammar', 'teh cat');
    expect(clipboard).not.toHaveBeenCalled();
  });

  it('does not start a second action while a reply streams', async () => {
    chat.turns.push({ key: 97, role: 'assistant', content: '', state: 'streaming', deltas: 0, id: 'r1' });
    clipboard.mockResolvedValueOnce('text');
    await qa.run('Explain');
    expect(run).not.toHaveBeenCalled();
    expect(qa.error).toMatch(/still running/);
  });

  it('opens the chat on the hotkey', () => {
    emit('prompt:open', null);
    expect(ui.tab).toBe('chat');
  });
});

describe('quick actions editor', () => {
  it('checks the rows as Settings would', () => {
    expect(checkActions(defaultActions)).toEqual([]);
    const found = checkActions([
      { name: ' ', prompt: placeholder },
      { name: 'Shout', prompt: 'no placeholder' },
      { name: 'shout', prompt: placeholder },
      { name: 'x'.repeat(41), prompt: placeholder },
    ]);
    expect(found).toEqual([
      { index: 0, msg: 'Action 1 has no name' },
      { index: 1, msg: 'Action 2: the prompt has no {{text}} where the text goes' },
      { index: 2, msg: 'Action 3: "shout" is also the name of action 2' },
      { index: 3, msg: 'Action 4: the name has 41 characters, at most 40' },
    ]);
  });

  it('adds, removes, resets and saves onto the settings in force', async () => {
    qa.edit();
    expect(qa.draft).toHaveLength(5);
    qa.remove(0);
    qa.add();
    const row = qa.draft[4];
    if (!row) throw new Error('no new row');
    row.name = '  Haiku ';
    row.prompt = `Write a haiku about:\n${placeholder}`;
    const cur = saved({ theme: 'dark' }); // saved elsewhere since this window read them
    vi.mocked(engine.getSettings).mockResolvedValueOnce(cur);
    vi.mocked(engine.updateSettings).mockImplementationOnce(async (s) => s);
    expect(await qa.save()).toBe(true);
    const sent = vi.mocked(engine.updateSettings).mock.calls[0]?.[0];
    expect(sent?.theme).toBe('dark');
    expect(sent?.quickActions?.map((a) => a.name)).toEqual(['Explain', 'Fix grammar', 'Translate to English', 'Draft a reply', 'Haiku']);
    expect(settings.saved?.quickActions).toHaveLength(5);
    expect(qa.justSaved).toBe(true);

    qa.reset();
    expect(qa.draft.map((a) => a.name)).toEqual(defaultActions.map((a) => a.name));
  });

  it('refuses bad rows before saving, and shows what the Go side refuses', async () => {
    qa.edit();
    const first = qa.draft[0];
    if (!first) throw new Error('no rows');
    first.prompt = 'Summarize';
    expect(await qa.save()).toBe(false);
    expect(engine.updateSettings).not.toHaveBeenCalled();
    expect(qa.problems).toEqual(['Action 1: the prompt has no {{text}} where the text goes']);
    expect(qa.badRows).toEqual([0]);

    first.prompt = placeholder;
    vi.mocked(engine.getSettings).mockResolvedValueOnce(saved());
    vi.mocked(engine.updateSettings).mockRejectedValueOnce(new Error('quickActions[2].name: must be one line'));
    expect(await qa.save()).toBe(false);
    expect(qa.problems).toEqual(['quickActions[2].name: must be one line']);
    expect(qa.badRows).toEqual([2]);
  });
});
