import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { emit, settings as settingsFixture } from '../../test/fakeEngine';
import type { Settings } from '../types';
import { defaultActions } from '../stores/quickActions.svelte';
import ServerSettings from './ServerSettings.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

/** stored are saved settings with the default quick actions. */
function stored(over: Partial<Settings> = {}): Settings {
  return settingsFixture({ quickActions: defaultActions.map((a) => ({ ...a })), ...over });
}

beforeEach(() => {
  vi.clearAllMocks();
});

describe('local server settings', () => {
  it('turns the server on and shows where it serves', async () => {
    vi.mocked(engine.getSettings).mockResolvedValue(stored());
    vi.mocked(engine.updateSettings).mockImplementation(async (s) => s);
    render(ServerSettings);
    await vi.waitFor(() => expect(engine.serverStatus).toHaveBeenCalled());
    expect(screen.getByTestId('server-status').textContent).toBe('Off');
    expect(screen.getByTestId('hotkey-status').textContent).toMatch(/macOS only/);
    vi.mocked(engine.serverStatus).mockResolvedValueOnce({ enabled: true, running: true, url: 'http://127.0.0.1:11435/v1' });
    await fireEvent.click(screen.getByTestId('server-enabled'));
    await vi.waitFor(() => expect(screen.getByTestId('server-status').textContent).toBe('Serving on http://127.0.0.1:11435/v1'));
    const sent = vi.mocked(engine.updateSettings).mock.calls[0]?.[0];
    expect(sent?.server).toEqual({ enabled: true, address: '127.0.0.1:11435', token: '' });
    // It stops when the Go side says so (server:status).
    emit('server:status', { enabled: true, running: false, error: 'cannot listen on 127.0.0.1:11435: the port is in use' });
    await vi.waitFor(() => expect(screen.getByTestId('server-status').textContent).toMatch(/port is in use/));
  });

  it('shows the refusal of a bad address or hotkey', async () => {
    vi.mocked(engine.getSettings).mockResolvedValue(stored());
    vi.mocked(engine.updateSettings).mockRejectedValueOnce(new Error('server.address: "0.0.0.0:1" is not a loopback address\nhotkey: "space": needs cmd, ctrl or option'));
    render(ServerSettings);
    await vi.waitFor(() => expect(engine.serverStatus).toHaveBeenCalled());
    await fireEvent.input(screen.getByTestId('server-address'), { target: { value: '0.0.0.0:1' } });
    await fireEvent.input(screen.getByTestId('setting-hotkey'), { target: { value: 'space' } });
    await fireEvent.click(screen.getByTestId('server-save'));
    const err = await screen.findByTestId('server-error');
    expect([...err.querySelectorAll('li')].map((l) => l.textContent)).toEqual([
      'server.address: "0.0.0.0:1" is not a loopback address',
      'hotkey: "space": needs cmd, ctrl or option',
    ]);
  });
});
