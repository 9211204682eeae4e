import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { emit, model, settings as savedSettings } from '../../test/fakeEngine';
import { chat } from '../stores/chat.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import { settings } from '../stores/settings.svelte';
import type { Final } from '../types';
import Conversation from './Conversation.svelte';
import PromptBox from './PromptBox.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

let off: () => void;
beforeEach(() => {
  off?.();
  vi.clearAllMocks();
  chat.newChat();
  off = chat.connect();
  engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
});

function final(id: string, over: Partial<Final> = {}): Final {
  return { id, finishReason: 'stop', text: '', promptTokens: 2293, reusedTokens: 2272, genTokens: 40, ttftMs: 90, prefillTokPerSec: 500, decodeTokPerSec: 30, ...over };
}

/** exchange asks text and ends its reply with f. */
async function exchange(text: string, id: string, f: Partial<Final>): Promise<void> {
  vi.mocked(engine.send).mockResolvedValueOnce({ replyId: id, conversationId: 3 });
  chat.setDraft(text);
  await chat.submit();
  emit('chat:final', final(id, f));
}

const replies = (): HTMLElement[] => screen.getAllByTestId('message').filter((m) => m.dataset.role === 'assistant');

describe('a reply', () => {
  it("shows the prompt's reuse and why a long reply stopped", async () => {
    render(Conversation);
    await exchange('Tell me everything', 'r1', { text: 'Lots', finishReason: 'length', genTokens: 12, maxTokens: 12 });
    await exchange('And then?', 'r2', { text: 'More', finishReason: 'length', genTokens: 700, maxTokens: 2048, promptTokens: 4096, reusedTokens: 0 });
    await vi.waitFor(() => expect(replies()).toHaveLength(2));
    const [first, second] = replies();
    expect(first?.querySelector('[data-testid="reuse"]')?.textContent).toBe('reused 2,272 of 2,293 prompt tokens');
    expect(first?.querySelector('[data-testid="length-note"]')?.textContent).toBe('stopped at the 12-token limit');
    const stats = first?.querySelector('[data-testid="message-stats"]')?.textContent ?? '';
    expect(stats).toMatch(/12 tokens\s+·\s+reused 2,272 of 2,293 prompt tokens\s+·\s+stopped at/);
    expect(second?.querySelector('[data-testid="reuse"]')?.textContent).toBe('reused 0 of 4,096 prompt tokens');
    expect(second?.querySelector('[data-testid="length-note"]')?.textContent).toBe('stopped: the context is full');
  });

  it("copies the reply's text", async () => {
    vi.mocked(engine.setClipboardText).mockResolvedValue(true);
    render(Conversation);
    await exchange('Hi', 'r1', { text: 'Hello **there**' });
    const copy = await screen.findByTestId('copy-reply');
    await fireEvent.click(copy);
    await vi.waitFor(() => expect(copy.textContent).toBe('Copied'));
    expect(engine.setClipboardText).toHaveBeenCalledWith('Hello **there**');
  });

  it('offers Regenerate on the last reply only, once it has ended', async () => {
    render(Conversation);
    await exchange('One', 'r1', { text: 'First' });
    vi.mocked(engine.send).mockResolvedValueOnce({ replyId: 'r2', conversationId: 3 });
    chat.setDraft('Two');
    await chat.submit();
    await vi.waitFor(() => expect(replies()).toHaveLength(2));
    expect(screen.queryByTestId('regenerate')).toBeNull(); // streaming
    expect(screen.queryByTestId('edit-question')).toBeNull();
    emit('chat:final', final('r2', { text: 'Second' }));
    const regenerate = await screen.findByTestId('regenerate');
    expect(screen.getAllByTestId('regenerate')).toHaveLength(1);
    expect(replies()[1]?.contains(regenerate)).toBe(true);
    expect(screen.getAllByTestId('copy-reply')).toHaveLength(2);

    vi.mocked(engine.send).mockResolvedValueOnce({ replyId: 'r3', conversationId: 3 });
    await fireEvent.click(regenerate);
    expect(engine.send).toHaveBeenLastCalledWith(
      [
        { role: 'user', content: 'One' },
        { role: 'assistant', content: 'First' },
        { role: 'user', content: 'Two' },
      ],
      0,
      3,
      [],
      true,
      '',
    );
    await vi.waitFor(() => expect(replies()[1]?.dataset.state).toBe('waiting'));
    expect(replies()).toHaveLength(2);
  });

  it('edits the last question in place and sends it again', async () => {
    render(Conversation);
    await exchange('What is teh time?', 'r1', { text: 'Noon' });
    await fireEvent.click(await screen.findByTestId('edit-question'));
    const input = screen.getByTestId('edit-input') as HTMLTextAreaElement;
    expect(input.value).toBe('What is teh time?');
    // Escape cancels the edit and is not the window's.
    const esc = await fireEvent.keyDown(input, { key: 'Escape' });
    expect(esc).toBe(false);
    expect(screen.queryByTestId('edit-input')).toBeNull();

    await fireEvent.click(await screen.findByTestId('edit-question'));
    await fireEvent.input(screen.getByTestId('edit-input'), { target: { value: 'What is the time?' } });
    vi.mocked(engine.send).mockResolvedValueOnce({ replyId: 'r2', conversationId: 3 });
    await fireEvent.click(screen.getByTestId('edit-send'));
    expect(engine.send).toHaveBeenLastCalledWith([{ role: 'user', content: 'What is the time?' }], 0, 3, [], true, '');
    await vi.waitFor(() => expect(screen.getAllByTestId('message').map((m) => m.textContent?.trim())).toContain('What is the time?'));
    expect(screen.queryByText('What is teh time?')).toBeNull();
  });
});

describe("the chat's reply limit", () => {
  it("shows the Settings' limit until the chat sets its own, and sends it", async () => {
    settings.saved = savedSettings({ maxReplyTokens: 2048 });
    render(PromptBox);
    const field = screen.getByTestId('reply-limit') as HTMLInputElement;
    expect(field.placeholder).toBe('2,048');
    expect(screen.getByTestId('reply-limit-hint').textContent).toBe('Settings: 2,048');
    await fireEvent.input(field, { target: { value: '16' } });
    expect(screen.getByTestId('reply-limit-hint').textContent).toBe('this chat only');
    await fireEvent.input(field, { target: { value: '0' } });
    expect(screen.getByTestId('reply-limit-hint').textContent).toBe('no limit in this chat');
    await fireEvent.input(field, { target: { value: 'x' } });
    expect(field.getAttribute('aria-invalid')).toBe('true');
    await fireEvent.input(screen.getByTestId('prompt-input'), { target: { value: 'Hi' } });
    await fireEvent.click(screen.getByTestId('send-button'));
    expect(engine.send).not.toHaveBeenCalled();
    expect(screen.getByTestId('prompt-error').textContent).toMatch(/whole number of tokens/);
    await fireEvent.input(field, { target: { value: '16' } });
    vi.mocked(engine.send).mockResolvedValueOnce({ replyId: 'r1', conversationId: 1 });
    await fireEvent.click(screen.getByTestId('send-button'));
    expect(engine.send).toHaveBeenLastCalledWith([{ role: 'user', content: 'Hi' }], 16, 0, [], false, '');
  });
});

describe("a reasoning model's reply", () => {
  it('shows the thinking collapsed above the answer, and Copy copies the answer', async () => {
    vi.mocked(engine.setClipboardText).mockResolvedValue(true);
    render(Conversation);
    vi.mocked(engine.send).mockResolvedValueOnce({ replyId: 'r1', conversationId: 3 });
    chat.setDraft('Hi');
    await chat.submit();
    emit('chat:delta', { id: 'r1', text: '', reasoning: 'They say hi.' });
    const section = (await screen.findByTestId('thinking')) as HTMLDetailsElement;
    await vi.waitFor(() => expect(section.open).toBe(true));
    expect(screen.getByTestId('thinking-toggle').textContent).toBe('Thinking…');
    emit('chat:delta', { id: 'r1', text: 'Hello!' });
    emit('chat:final', final('r1', { text: 'Hello!', reasoning: 'They say hi.', thinkingMs: 2100 }));
    await vi.waitFor(() => expect(section.open).toBe(false));
    expect(screen.getByTestId('thinking-toggle').textContent).toBe('Thought for 2 s');
    await fireEvent.click(await screen.findByTestId('copy-reply'));
    expect(engine.setClipboardText).toHaveBeenCalledWith('Hello!');
  });

  it("shows only a quick action's answer", async () => {
    render(Conversation);
    await chat.startNew(async () => ({ replyId: 'q1', conversationId: 5, prompt: 'Fix: teh', name: 'Fix' }));
    emit('chat:delta', { id: 'q1', text: '', reasoning: 'A typo.' });
    expect(await screen.findByTestId('thinking-quiet')).toBeTruthy();
    emit('chat:final', final('q1', { text: 'the', reasoning: 'A typo.' }));
    await vi.waitFor(() => expect(replies()[0]?.dataset.state).toBe('done'));
    expect(screen.queryByTestId('thinking')).toBeNull();
    expect(replies()[0]?.textContent).not.toContain('A typo.');
  });
});

describe('the thinking switch', () => {
  it('shows for a template with enable_thinking and sets the chat', async () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ thinkingControl: 'enable_thinking', reasoning: 'think' }) };
    render(PromptBox);
    const box = (await screen.findByTestId('thinking-switch')) as HTMLInputElement;
    expect(box.checked).toBe(true);
    await fireEvent.click(box);
    expect(chat.thinking).toBe('off');
  });

  it('is an effort choice for gpt-oss, and absent for other models and remote ones', async () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ thinkingControl: 'reasoning_effort', reasoning: 'harmony' }) };
    const { unmount } = render(PromptBox);
    const effort = (await screen.findByTestId('thinking-effort')) as HTMLSelectElement;
    expect(effort.value).toBe('medium');
    await fireEvent.change(effort, { target: { value: 'high' } });
    expect(chat.thinking).toBe('high');
    unmount();
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
    const other = render(PromptBox);
    expect(screen.queryByTestId('thinking-switch')).toBeNull();
    expect(screen.queryByTestId('thinking-effort')).toBeNull();
    other.unmount();
    engineStatus.status = {
      state: 'ready',
      busy: false,
      running: 0,
      model: model({ thinkingControl: 'enable_thinking' }),
      remote: model({ remote: true, name: 'far' }),
    };
    render(PromptBox);
    expect(screen.queryByTestId('thinking-switch')).toBeNull();
  });
});
