import { fireEvent, render, screen } from '@testing-library/svelte';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { emit, must } from '../../test/fakeEngine';
import { chat } from '../stores/chat.svelte';
import { history, searchDelayMs } from '../stores/history.svelte';
import { ui } from '../stores/ui.svelte';
import type { ConversationSummary } from '../types';
import HistoryView from './HistoryView.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const kettle: ConversationSummary = { id: 1, title: 'A tiny kettle', model: 'Tiny', updatedAt: '2026-01-02T10:00:00Z', messages: 2, snippet: 'Write a haiku about a tiny kettle' };
const sea: ConversationSummary = { id: 2, title: 'The sea', model: 'Tiny', updatedAt: '2026-01-03T10:00:00Z', messages: 4, snippet: 'Tell me a story about the sea' };

const conversations = vi.mocked(engine.conversations);
let off: () => void;

beforeEach(() => {
  vi.clearAllMocks();
  history.query = '';
  history.items = [];
  history.notice = null;
  conversations.mockImplementation(async (q) => [kettle, sea].filter((c) => !q || c.snippet.includes(q)));
  off = history.connect();
});

afterEach(() => {
  off();
  vi.useRealTimers();
});

const ids = (): string[] => screen.queryAllByTestId('history-item').map((e) => e.dataset.id ?? '');

describe('history', () => {
  it('lists conversations with title, model, date and snippet', async () => {
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toEqual(['1', '2']));
    const item = screen.getAllByTestId('history-item')[0] as HTMLElement;
    expect(item.textContent).toContain('A tiny kettle');
    expect(item.textContent).toContain('Tiny');
    expect(item.textContent).toContain('Write a haiku');
    expect(item.textContent).toMatch(/Jan|2026|\d/);
  });

  it('searches once typing pauses', async () => {
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toHaveLength(2));
    vi.useFakeTimers();
    conversations.mockClear();
    const box = screen.getByTestId('history-search');
    for (const q of ['k', 'ke', 'kettle']) {
      await fireEvent.input(box, { target: { value: q } });
      await vi.advanceTimersByTimeAsync(searchDelayMs / 3);
    }
    expect(conversations).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(searchDelayMs);
    expect(conversations).toHaveBeenCalledTimes(1);
    expect(conversations).toHaveBeenCalledWith('kettle');
    expect(ids()).toEqual(['1']);

    await fireEvent.input(box, { target: { value: 'nothing like it' } });
    await vi.advanceTimersByTimeAsync(searchDelayMs);
    expect(ids()).toEqual([]);
    expect(screen.getByTestId('history-empty').textContent).toContain('nothing like it');
  });

  it('deletes after a confirmation in the page', async () => {
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toEqual(['1', '2']));
    const [first] = screen.getAllByTestId('history-item') as HTMLElement[];
    await fireEvent.click(must(must(first).querySelector('[data-testid="history-delete"]')));
    expect(engine.deleteConversation).not.toHaveBeenCalled();
    await fireEvent.click(screen.getByTestId('history-delete-cancel'));
    expect(ids()).toEqual(['1', '2']);

    chat.conversationId = 1; // the conversation shown in the chat
    await fireEvent.click(must(must(first).querySelector('[data-testid="history-delete"]')));
    await fireEvent.click(screen.getByTestId('history-delete-confirm'));
    await vi.waitFor(() => expect(ids()).toEqual(['2']));
    expect(engine.deleteConversation).toHaveBeenCalledWith(1);
    expect(chat.conversationId).toBe(0); // the next Send starts a new one
  });

  it('keeps the item and says why when deleting fails', async () => {
    vi.mocked(engine.deleteConversation).mockRejectedValueOnce(new Error('database is locked'));
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toEqual(['1', '2']));
    await fireEvent.click(must(screen.getAllByTestId('history-delete')[1]));
    await fireEvent.click(screen.getByTestId('history-delete-confirm'));
    await vi.waitFor(() => expect(screen.getByTestId('history-notice').textContent).toContain('database is locked'));
    expect(ids()).toEqual(['1', '2']);
  });

  it('opens a conversation into the chat', async () => {
    vi.mocked(engine.openConversation).mockResolvedValueOnce({
      id: 2,
      title: 'The sea',
      model: 'Tiny',
      messages: [
        { role: 'user', content: 'Tell me a story about the sea' },
        { role: 'assistant', content: 'Waves.' },
      ],
    });
    ui.tab = 'history';
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toHaveLength(2));
    await fireEvent.click(must(screen.getAllByTestId('history-open')[1]));
    await vi.waitFor(() => expect(ui.tab).toBe('chat'));
    expect(engine.openConversation).toHaveBeenCalledWith(2);
    expect(chat.conversationId).toBe(2);
    expect(chat.turns.map((t) => t.content)).toEqual(['Tell me a story about the sea', 'Waves.']);
  });

  it('exports through the save dialog and shows where', async () => {
    vi.mocked(engine.saveConversation).mockResolvedValueOnce('/home/me/A tiny kettle.md');
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toHaveLength(2));
    await fireEvent.click(must(screen.getAllByTestId('history-export')[0]));
    await vi.waitFor(() => expect(screen.getByTestId('history-notice').textContent).toContain('/home/me/A tiny kettle.md'));
    expect(engine.saveConversation).toHaveBeenCalledWith(1);
  });

  it('copies the Markdown', async () => {
    const writeText = vi.fn(async () => {});
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    vi.mocked(engine.exportConversation).mockResolvedValueOnce('# A tiny kettle\n');
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toHaveLength(2));
    await fireEvent.click(must(screen.getAllByTestId('history-copy')[0]));
    await vi.waitFor(() => expect(writeText).toHaveBeenCalledWith('# A tiny kettle\n'));
  });

  it('reads the list again on history:changed', async () => {
    render(HistoryView);
    await vi.waitFor(() => expect(ids()).toHaveLength(2));
    conversations.mockResolvedValueOnce([sea]);
    emit('history:changed', { id: 1 });
    await vi.waitFor(() => expect(ids()).toEqual(['2']));
  });
});
