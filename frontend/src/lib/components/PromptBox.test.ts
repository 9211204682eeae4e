import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { model, must } from '../../test/fakeEngine';
import { chat } from '../stores/chat.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import Conversation from './Conversation.svelte';
import PromptBox from './PromptBox.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

beforeEach(() => {
  vi.clearAllMocks();
  chat.newChat();
  chat.draft = '';
  engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
  vi.mocked(engine.send).mockResolvedValue({ replyId: 'r1', conversationId: 1 });
});

const box = (): HTMLTextAreaElement => screen.getByTestId('prompt-input') as HTMLTextAreaElement;

describe('prompt box', () => {
  it('shows prompt-error for an empty prompt instead of sending', async () => {
    render(PromptBox);
    await fireEvent.input(box(), { target: { value: '   ' } });
    await fireEvent.click(screen.getByTestId('send-button'));
    expect(screen.getByTestId('prompt-error').textContent).toMatch(/empty/i);
    expect(engine.send).not.toHaveBeenCalled();
    await fireEvent.keyDown(box(), { key: 'Enter' });
    expect(engine.send).not.toHaveBeenCalled();
    await fireEvent.input(box(), { target: { value: 'Hi' } });
    expect(screen.queryByTestId('prompt-error')).toBeNull();
  });

  it('sends on Enter; Shift+Enter is a new line', async () => {
    render(PromptBox);
    await fireEvent.input(box(), { target: { value: 'Hello' } });
    const shift = await fireEvent.keyDown(box(), { key: 'Enter', shiftKey: true });
    expect(shift).toBe(true); // not prevented: the textarea adds the newline
    expect(engine.send).not.toHaveBeenCalled();
    await fireEvent.keyDown(box(), { key: 'Enter' });
    expect(engine.send).toHaveBeenCalledWith([{ role: 'user', content: 'Hello' }], 0, 0, [], false, '');
    expect(box().value).toBe('');
  });

  it('shows Stop while a reply streams', async () => {
    render(PromptBox);
    await fireEvent.input(box(), { target: { value: 'Hello' } });
    await fireEvent.click(screen.getByTestId('send-button'));
    await vi.waitFor(() => expect(screen.getByTestId('stop-button')).toBeTruthy());
    expect(screen.queryByTestId('send-button')).toBeNull();
    await fireEvent.click(screen.getByTestId('stop-button'));
    await vi.waitFor(() => expect(engine.stop).toHaveBeenCalledWith('r1'));
  });

  it('cannot send before a model is ready', () => {
    engineStatus.status = { state: 'loading', busy: false, running: 0 };
    render(PromptBox);
    expect((screen.getByTestId('send-button') as HTMLButtonElement).disabled).toBe(true);
  });
});

describe('conversation', () => {
  it('shows the reply as Markdown with its stats and the prefill progress', async () => {
    render(Conversation);
    chat.setDraft('Hi');
    await chat.submit();
    const reply = must(chat.turns[1]);
    reply.prefill = { done: 50, total: 200 };
    await vi.waitFor(() => expect(screen.getByTestId('prefill-progress').getAttribute('aria-valuenow')).toBe('25'));
    reply.content = 'Some `code`';
    reply.state = 'done';
    reply.prefill = undefined;
    reply.final = { id: 'r1', finishReason: 'stop', text: 'Some `code`', promptTokens: 5, reusedTokens: 0, genTokens: 4, ttftMs: 120, prefillTokPerSec: 50, decodeTokPerSec: 31.25 };
    await vi.waitFor(() => expect(screen.getByTestId('ttft').textContent).toContain('120 ms'));
    expect(screen.getByTestId('tok-per-sec').textContent).toBe('31.3 tok/s');
    const msgs = screen.getAllByTestId('message');
    expect(msgs.map((m) => [m.dataset.role, m.dataset.state])).toEqual([
      ['user', 'done'],
      ['assistant', 'done'],
    ]);
    expect(must(msgs[1]).querySelector('[data-testid="markdown"] code')?.textContent).toBe('code');
    expect(screen.queryByTestId('prefill-progress')).toBeNull();
  });
});
