import { fireEvent, render, screen } from '@testing-library/svelte';
import { describe, expect, it, vi } from 'vitest';
import type { Download } from '../types';
import DownloadControls from './DownloadControls.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const MiB = 2 ** 20;

function dl(over: Partial<Download> = {}): Download {
  return {
    key: 'tiny/Q4_0',
    id: 'tiny',
    quant: 'Q4_0',
    fileName: 'tiny.Q4_0.gguf',
    state: 'downloading',
    done: 35 * MiB,
    total: 100 * MiB,
    speed: 2 * MiB,
    etaSec: 125,
    ...over,
  };
}

function setup(props: Partial<Parameters<typeof DownloadControls>[1]> = {}) {
  const ondownload = vi.fn();
  const oncancel = vi.fn();
  const onload = vi.fn();
  render(DownloadControls, { ondownload, oncancel, onload, ...props });
  return { ondownload, oncancel, onload };
}

describe('download row', () => {
  it('offers the download', async () => {
    const { ondownload } = setup();
    await fireEvent.click(screen.getByTestId('download-button'));
    expect(ondownload).toHaveBeenCalledOnce();
    expect(screen.getByTestId('download-button').textContent).toContain('Download');
    expect(screen.queryByTestId('download-progress')).toBeNull();
    expect(screen.queryByTestId('download-error')).toBeNull();
  });

  it('shows progress, speed, time left and Cancel while downloading', async () => {
    const { oncancel } = setup({ download: dl() });
    const bar = screen.getByTestId('download-progress') as HTMLProgressElement;
    expect(bar.getAttribute('aria-valuenow')).toBe('35');
    expect(bar.value).toBe(35);
    expect(screen.getByTestId('download-speed').textContent).toBe('2.0 MiB/s');
    expect(screen.getByTestId('download-eta').textContent).toBe('2 min 5 s left');
    expect(screen.queryByTestId('download-button')).toBeNull();
    await fireEvent.click(screen.getByTestId('download-cancel'));
    expect(oncancel).toHaveBeenCalledOnce();
  });

  it('shows an unknown size as an open progress bar', () => {
    setup({ download: dl({ total: -1, etaSec: 0 }) });
    expect(screen.getByTestId('download-progress').hasAttribute('aria-valuenow')).toBe(false);
    expect(screen.getByTestId('download-eta').textContent).toContain('unknown');
  });

  it('can be cancelled while verifying', () => {
    setup({ download: dl({ state: 'verifying', done: 100 * MiB }) });
    expect(screen.getByTestId('download-cancel')).toBeTruthy();
    expect(screen.getByText(/verifying/i)).toBeTruthy();
  });

  it('offers to resume a cancelled download with what it kept', () => {
    setup({ download: dl({ state: 'cancelled', done: 60 * MiB }) });
    expect(screen.queryByTestId('download-cancel')).toBeNull();
    expect(screen.getByTestId('download-button').textContent).toContain('Resume (60.0 MiB kept)');
  });

  it('shows why it failed, and offers it again', () => {
    setup({ download: dl({ state: 'failed', error: 'sha256 does not match: the file is damaged' }) });
    expect(screen.getByTestId('download-error').textContent).toContain('sha256 does not match');
    expect(screen.getByTestId('download-button')).toBeTruthy();
    expect(screen.queryByTestId('download-done')).toBeNull();
  });

  it('shows why it did not start', () => {
    setup({ startError: 'no network' });
    expect(screen.getByTestId('download-error').textContent).toContain('no network');
  });

  it('offers Load once done', async () => {
    const { onload } = setup({ download: dl({ state: 'done', done: 100 * MiB, path: '/m/tiny.gguf' }) });
    expect(screen.getByTestId('download-done')).toBeTruthy();
    expect(screen.queryByTestId('download-progress')).toBeNull();
    await fireEvent.click(screen.getByTestId('catalog-load'));
    expect(onload).toHaveBeenCalledWith('/m/tiny.gguf');
  });

  it('knows a file downloaded before', () => {
    setup({ localPath: '/m/old.gguf' });
    expect(screen.getByTestId('download-done')).toBeTruthy();
    expect(screen.queryByTestId('download-button')).toBeNull();
  });
});
