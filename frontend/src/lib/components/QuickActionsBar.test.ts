import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { emit, model, settings as settingsFixture } from '../../test/fakeEngine';
import type { Settings } from '../types';
import { chat } from '../stores/chat.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import { defaultActions, quickActions } from '../stores/quickActions.svelte';
import { settings } from '../stores/settings.svelte';
import { ui } from '../stores/ui.svelte';
import PromptBox from './PromptBox.svelte';
import QuickActionsBar from './QuickActionsBar.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

/** stored are saved settings with the default quick actions. */
function stored(over: Partial<Settings> = {}): Settings {
  return settingsFixture({ quickActions: defaultActions.map((a) => ({ ...a })), ...over });
}

let offChat: () => void;
beforeEach(() => {
  offChat?.();
  vi.clearAllMocks();
  chat.newChat();
  offChat = chat.connect();
  quickActions.error = null;
  settings.saved = stored();
  engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
});

describe('quick actions row', () => {
  it('runs the clicked action on the clipboard and shows the answer in the chat', async () => {
    vi.mocked(engine.clipboardText).mockResolvedValueOnce('Ceci est un texte.');
    vi.mocked(engine.runQuickAction).mockResolvedValueOnce({ replyId: 'r2', conversationId: 4, name: 'Translate to English', prompt: 'Translate: Ceci est un texte.' });
    render(QuickActionsBar);
    const buttons = screen.getAllByTestId('quick-action');
    expect(buttons.map((b) => b.textContent)).toEqual(defaultActions.map((a) => a.name));
    const translate = buttons.find((b) => b.dataset.name === 'Translate to English');
    if (!translate) throw new Error('no Translate button');
    await fireEvent.click(translate);
    await vi.waitFor(() => expect(chat.turns).toHaveLength(2));
    expect(engine.runQuickAction).toHaveBeenCalledWith('Translate to English', 'Ceci est un texte.');
    emit('chat:delta', { id: 'r2', text: 'This is a text.' });
    expect(chat.turns[1]?.content).toBe('This is a text.');
    // A reply streams: the actions wait for it.
    await vi.waitFor(() => expect((screen.getAllByTestId('quick-action')[0] as HTMLButtonElement).disabled).toBe(true));
  });

  it('says what went wrong', async () => {
    vi.mocked(engine.clipboardText).mockResolvedValueOnce('');
    render(QuickActionsBar);
    await fireEvent.click(screen.getAllByTestId('quick-action')[0] as HTMLElement);
    const err = await screen.findByTestId('quick-action-error');
    expect(err.textContent).toMatch(/Summarize: The clipboard has no text/);
  });

  it('is disabled until a model is ready, and absent without actions', async () => {
    engineStatus.status = { state: 'loading', busy: false, running: 0 };
    const { unmount } = render(QuickActionsBar);
    expect((screen.getAllByTestId('quick-action')[0] as HTMLButtonElement).disabled).toBe(true);
    unmount();
    settings.saved = stored({ quickActions: [] });
    render(QuickActionsBar);
    expect(screen.queryByTestId('quick-actions')).toBeNull();
  });
});

describe('global hotkey', () => {
  it('shows the chat with its prompt box focused', async () => {
    ui.show('settings');
    const off = quickActions.connect();
    render(PromptBox);
    emit('prompt:open', null);
    expect(ui.tab).toBe('chat');
    await vi.waitFor(() => expect(document.activeElement).toBe(screen.getByTestId('prompt-input')));
    off();
  });
});
