import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { UI } from './ui.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const escape = (): KeyboardEvent => new KeyboardEvent('keydown', { key: 'Escape', cancelable: true });

beforeEach(() => {
  vi.clearAllMocks();
});

describe('Escape', () => {
  it('leaves the window alone where nothing could show it again', async () => {
    vi.mocked(engine.canHideWindow).mockResolvedValueOnce(false);
    const ui = new UI();
    ui.onKeydown(escape()); // before the Go side answered
    await ui.connectWindow();
    const e = escape();
    ui.onKeydown(e);
    expect(engine.hideWindow).not.toHaveBeenCalled();
    expect(e.defaultPrevented).toBe(false);
  });

  it('hides the popover where the menu-bar item brings it back', async () => {
    vi.mocked(engine.canHideWindow).mockResolvedValueOnce(true);
    const ui = new UI();
    await ui.connectWindow();
    const e = escape();
    ui.onKeydown(e);
    expect(engine.hideWindow).toHaveBeenCalledTimes(1);
    expect(e.defaultPrevented).toBe(true);
    // Other keys, and an Escape a dialog already used, do nothing.
    ui.onKeydown(new KeyboardEvent('keydown', { key: 'Enter' }));
    const used = escape();
    used.preventDefault();
    ui.onKeydown(used);
    expect(engine.hideWindow).toHaveBeenCalledTimes(1);
  });

  it('keeps the window when the Go side cannot say', async () => {
    vi.mocked(engine.canHideWindow).mockRejectedValueOnce(new Error('the Nibble engine is not reachable'));
    const ui = new UI();
    await ui.connectWindow();
    expect(ui.canHide).toBe(false);
    ui.onKeydown(escape());
    expect(engine.hideWindow).not.toHaveBeenCalled();
  });
});
