import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { settings as settingsFixture } from '../../test/fakeEngine';
import { settings } from '../stores/settings.svelte';
import type { Settings } from '../types';
import SettingsView from './SettingsView.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const GiB = 2 ** 30;
const base: Settings = settingsFixture({ memoryLimit: 52428800 }); // 50 MiB: not a round number of GiB

const update = vi.mocked(engine.updateSettings);

beforeEach(() => {
  vi.clearAllMocks();
  settings.saved = null;
  settings.errors = [];
  settings.badFields = {};
  settings.justSaved = false;
  vi.mocked(engine.getSettings).mockResolvedValue(base);
});

async function open(): Promise<void> {
  render(SettingsView);
  await vi.waitFor(() => expect(settings.saved).not.toBeNull());
  expect((screen.getByTestId('setting-context') as HTMLInputElement).value).toBe('4096');
}

const input = (id: string): HTMLInputElement => screen.getByTestId(id) as HTMLInputElement;

describe('settings', () => {
  it('shows the memory limit in MiB under a GiB, in GiB above', async () => {
    await open();
    expect(input('setting-memory-limit').value).toBe('50');
    expect((screen.getByTestId('setting-memory-unit') as HTMLSelectElement).value).toBe('MiB');
  });

  it('saves the fields, the memory limit as bytes in the unit chosen, and says so', async () => {
    update.mockImplementation(async (s) => s);
    await open();
    await fireEvent.input(input('setting-system-prompt'), { target: { value: 'Be brief.' } });
    await fireEvent.input(input('setting-temperature'), { target: { value: '0.2' } });
    await fireEvent.input(input('setting-memory-limit'), { target: { value: '6' } });
    await fireEvent.change(screen.getByTestId('setting-memory-unit'), { target: { value: 'GiB' } });
    await fireEvent.change(screen.getByTestId('setting-theme'), { target: { value: 'dark' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(screen.getByTestId('settings-saved')).toBeTruthy());
    const sent = update.mock.calls[0]?.[0];
    expect(sent?.systemPrompt).toBe('Be brief.');
    expect(sent?.sampling.temperature).toBe(0.2);
    expect(sent?.sampling.topK).toBe(40); // the rest is kept
    expect(sent?.memoryLimit).toBe(6 * GiB);
    expect(sent?.theme).toBe('dark');
    expect(document.documentElement.dataset.theme).toBe('dark');
    expect(screen.queryByTestId('settings-error')).toBeNull();
    // Shown back in GiB; then 1536 MiB typed is saved as bytes too.
    expect(input('setting-memory-limit').value).toBe('6');
    await fireEvent.input(input('setting-memory-limit'), { target: { value: '1536' } });
    await fireEvent.change(screen.getByTestId('setting-memory-unit'), { target: { value: 'MiB' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(update).toHaveBeenCalledTimes(2));
    expect(update.mock.calls[1]?.[0].memoryLimit).toBe(1536 * 2 ** 20);
    expect(input('setting-memory-limit').value).toBe('1.5');
    expect((screen.getByTestId('setting-memory-unit') as HTMLSelectElement).value).toBe('GiB');
  });

  it('saves what a load does when the context does not fit', async () => {
    update.mockImplementation(async (s) => s);
    await open();
    expect((screen.getByTestId('setting-when-too-long') as HTMLSelectElement).value).toBe('refuse');
    await fireEvent.change(screen.getByTestId('setting-when-too-long'), { target: { value: 'evict' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(update).toHaveBeenCalled());
    expect(update.mock.calls[0]?.[0].whenContextDoesNotFit).toBe('evict');
  });

  it('keeps an untouched memory limit exact', async () => {
    update.mockImplementation(async (s) => s);
    await open();
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(update).toHaveBeenCalled());
    expect(update.mock.calls[0]?.[0].memoryLimit).toBe(52428800);
  });

  it('shows and saves the document size limit in MiB', async () => {
    update.mockImplementation(async (s) => s);
    await open();
    expect(input('setting-document-limit').value).toBe('16');
    await fireEvent.input(input('setting-document-limit'), { target: { value: '8' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(update).toHaveBeenCalled());
    expect(update.mock.calls[0]?.[0].documentMaxBytes).toBe(8 * 2 ** 20);
    update.mockClear();
    await fireEvent.input(input('setting-document-limit'), { target: { value: '0' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    expect(update).not.toHaveBeenCalled();
    expect(input('setting-document-limit').getAttribute('aria-invalid')).toBe('true');
  });

  it('shows and saves the longest reply; 0 is no limit, a fraction is refused', async () => {
    update.mockImplementation(async (s) => s);
    await open();
    expect(input('setting-max-reply').value).toBe('2048');
    await fireEvent.input(input('setting-max-reply'), { target: { value: '512' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(update).toHaveBeenCalled());
    expect(update.mock.calls[0]?.[0].maxReplyTokens).toBe(512);
    update.mockClear();
    await fireEvent.input(input('setting-max-reply'), { target: { value: '0' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(update).toHaveBeenCalled());
    expect(update.mock.calls[0]?.[0].maxReplyTokens).toBe(0);
    update.mockClear();
    await fireEvent.input(input('setting-max-reply'), { target: { value: '10.5' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    expect(update).not.toHaveBeenCalled();
    expect(input('setting-max-reply').getAttribute('aria-invalid')).toBe('true');
    expect(screen.getByTestId('settings-error').textContent).toContain('maxReplyTokens: 10.5 is not a whole number of tokens');
  });

  it('shows the errors UpdateSettings names, by field', async () => {
    update.mockRejectedValueOnce(new Error('sampling.temperature: -3 is out of range: want 0 to 5 (0 = greedy)\ncontextTokens: 100 is out of range: want 512 to 1048576'));
    await open();
    await fireEvent.input(input('setting-temperature'), { target: { value: '-3' } });
    await fireEvent.input(input('setting-context'), { target: { value: '100' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    await vi.waitFor(() => expect(screen.getByTestId('settings-error')).toBeTruthy());
    const text = screen.getByTestId('settings-error').textContent ?? '';
    expect(text).toContain('-3 is out of range');
    expect(text).toContain('100 is out of range');
    expect(input('setting-temperature').getAttribute('aria-invalid')).toBe('true');
    expect(input('setting-context').getAttribute('aria-invalid')).toBe('true');
    expect(input('setting-memory-limit').getAttribute('aria-invalid')).toBeNull();
    expect(screen.queryByTestId('settings-saved')).toBeNull();
  });

  it('refuses what is not a number without asking the Go side', async () => {
    await open();
    await fireEvent.input(input('setting-memory-limit'), { target: { value: '-1' } });
    await fireEvent.input(input('setting-temperature'), { target: { value: '' } });
    await fireEvent.click(screen.getByTestId('settings-save'));
    expect(update).not.toHaveBeenCalled();
    const text = screen.getByTestId('settings-error').textContent ?? '';
    expect(text).toContain('negative');
    expect(text).toContain('not a number');
  });
});
