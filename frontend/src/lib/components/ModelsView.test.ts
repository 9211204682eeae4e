import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { emit, estimate, model, must } from '../../test/fakeEngine';
import { catalog } from '../stores/catalog.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import { models } from '../stores/models.svelte';
import type { CatalogEntry, LocalModel } from '../types';
import Header from './Header.svelte';
import LocalModels from './LocalModels.svelte';
import CatalogList from './CatalogList.svelte';
import { ui } from '../stores/ui.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const row = (over: Partial<LocalModel>): LocalModel => ({
  path: '/m/a.gguf',
  name: 'A',
  source: 'folder',
  arch: 'llama',
  fileType: 'Q4_0',
  size: 2 ** 30,
  params: 1e9,
  ctxTrain: 8192,
  loaded: false,
  demo: false,
  tokPerSec: 0,
  ...over,
});

const list = [
  row({ path: '/m/demo.gguf', name: 'demo', demo: true, source: 'demo', loaded: true }),
  row({ path: '/m/big.gguf', name: 'Big', tokPerSec: 12.6, speedNote: 'Expected decode speed at 4096 tokens of context' }),
  row({ path: '/m/bad.gguf', name: 'bad.gguf', problem: 'not a GGUF file (no GGUF magic)' }),
];

let off: (() => void) | undefined;
beforeEach(() => {
  off?.();
  vi.clearAllMocks();
  models.loadError = null;
  vi.mocked(engine.models).mockResolvedValue(list);
  off = models.connect();
});

const byPath = (p: string): HTMLElement => document.querySelector(`[data-testid="local-model"][data-path="${p}"]`) as HTMLElement;

describe('local models', () => {
  it('lists the files, marks the loaded one and the bad ones', async () => {
    render(LocalModels);
    await vi.waitFor(() => expect(screen.getAllByTestId('local-model')).toHaveLength(3));
    expect(byPath('/m/demo.gguf').dataset.loaded).toBe('true');
    expect(byPath('/m/big.gguf').dataset.loaded).toBe('false');
    expect(byPath('/m/big.gguf').textContent).toContain('Q4_0');
    expect(byPath('/m/big.gguf').textContent).toContain('8K');
    // The expected speed where there is one; none for a file without a figure.
    expect(byPath('/m/big.gguf').querySelector('[data-testid="model-speed"]')?.textContent).toBe('~13 tok/s');
    expect(byPath('/m/bad.gguf').querySelector('[data-testid="model-speed"]')).toBeNull();
    const bad = byPath('/m/bad.gguf');
    expect(bad.querySelector('[data-testid="model-problem"]')?.textContent).toContain('not a GGUF');
    expect((bad.querySelector('[data-testid="load-model"]') as HTMLButtonElement).disabled).toBe(true);
  });

  it('shows the refusal of a load with its advice', async () => {
    vi.mocked(engine.loadModel).mockRejectedValueOnce(new Error('Big will not fit: needs 40.0 of 8.0 GiB.\nChoose a smaller quantization.\nClose other apps.'));
    render(LocalModels);
    await vi.waitFor(() => expect(byPath('/m/big.gguf')).toBeTruthy());
    await fireEvent.click(must(byPath('/m/big.gguf').querySelector('[data-testid="load-model"]')));
    await vi.waitFor(() => expect(screen.getByTestId('load-error')).toBeTruthy());
    expect(engine.loadModel).toHaveBeenCalledWith('/m/big.gguf');
    expect(screen.getByTestId('load-error').textContent).toBe('Big will not fit: needs 40.0 of 8.0 GiB.\nChoose a smaller quantization.\nClose other apps.');
  });

  it('follows models:changed', async () => {
    render(LocalModels);
    await vi.waitFor(() => expect(screen.getAllByTestId('local-model')).toHaveLength(3));
    emit('models:changed', [row({ path: '/m/big.gguf', loaded: true })]);
    await vi.waitFor(() => expect(screen.getAllByTestId('local-model')).toHaveLength(1));
    expect(byPath('/m/big.gguf').dataset.loaded).toBe('true');
  });

  it('opens a file through the dialog, and a cancel changes nothing', async () => {
    render(LocalModels);
    await fireEvent.click(screen.getByTestId('open-model-file'));
    expect(engine.chooseModelFile).toHaveBeenCalledOnce();
    await vi.waitFor(() => expect(engine.models).toHaveBeenCalledTimes(1)); // the first listing only
  });
});

describe('catalog', () => {
  const entry: CatalogEntry = {
    id: 'tiny',
    name: 'Tiny Llama',
    family: 'llama',
    paramsB: 1.1,
    ctxTrain: 2048,
    runnable: true,
    files: [
      { quant: 'Q4_0', fileName: 't.gguf', url: 'u', size: 600 * 2 ** 20, sizeApprox: true, estimate: estimate({ approx: true, total: 2 ** 30, maxCtx: 2048, verdict: 'tight', tokPerSec: 41.6, speedNote: 'Expected decode speed at 2048 tokens of context: 650 MB a token' }) },
    ],
  };

  it('shows each file with its estimate, and reads the exact one', async () => {
    catalog.entries = [entry];
    vi.mocked(engine.catalogEstimate).mockResolvedValueOnce(estimate({ approx: false, total: 1.5 * 2 ** 30, verdict: 'fits', maxCtx: 2048, tokPerSec: 7.25 }));
    render(CatalogList);
    // The expected speed beside the verdict, and how it was reached on hover.
    expect(screen.getByTestId('catalog-speed').textContent).toBe('~42 tok/s');
    expect(screen.getByTestId('catalog-speed').title).toContain('650 MB a token');
    const file = screen.getByTestId('catalog-file');
    expect(file.dataset.quant).toBe('Q4_0');
    const est = screen.getByTestId('catalog-estimate');
    expect(est.dataset.verdict).toBe('tight');
    expect(est.textContent).toContain('≈ 1.0 GiB');
    expect(est.textContent).toContain('2K');
    await fireEvent.click(screen.getByTestId('catalog-exact'));
    await vi.waitFor(() => expect(screen.getByTestId('catalog-estimate').dataset.verdict).toBe('fits'));
    expect(engine.catalogEstimate).toHaveBeenCalledWith('tiny', 'Q4_0');
    expect(screen.getByTestId('catalog-estimate').textContent).toContain('1.5 GiB');
    expect(screen.getByTestId('catalog-speed').textContent).toBe('~7.3 tok/s');
  });

  it('grades a mixture of experts by all its weights and shows what a token reads', async () => {
    const GiB = 2 ** 30;
    const moe = (total: number, verdict: string) =>
      estimate({ approx: false, weights: 17.3 * GiB, active: 1.9 * GiB, activeApprox: true, experts: 128, expertsUsed: 8, total, verdict, maxCtx: 0 });
    catalog.entries = [
      {
        ...entry,
        id: 'qwen3-30b-a3b',
        name: 'Qwen3 30B-A3B',
        files: [{ ...must(entry.files[0]), quant: 'Q4_K_M', estimate: moe(18.4 * GiB, 'will-not-fit') }],
      },
    ];
    render(CatalogList);
    const est = screen.getByTestId('catalog-estimate');
    expect(est.dataset.verdict).toBe('will-not-fit');
    expect(est.textContent).toContain('will not fit');
    const read = screen.getByTestId('catalog-read');
    expect(read.textContent).toBe('17.3 GiB resident · ≈ 1.9 GiB read per token');
    expect(read.title).toBe('8 of 128 experts per token');
    catalog.entries = [entry];
  });

  it('starts and follows a download in its row', async () => {
    vi.mocked(engine.catalog).mockResolvedValue([entry]);
    catalog.downloads = {};
    const off = catalog.connect();
    await vi.waitFor(() => expect(catalog.entries).toHaveLength(1));
    vi.mocked(engine.download).mockResolvedValueOnce({ key: 'tiny/Q4_0', id: 'tiny', quant: 'Q4_0', fileName: 't.gguf', state: 'starting', done: 0, total: -1, speed: 0, etaSec: 0 });
    render(CatalogList);
    await fireEvent.click(screen.getByTestId('download-button'));
    await vi.waitFor(() => expect(screen.getByTestId('download-progress')).toBeTruthy());
    emit('download:progress', { key: 'tiny/Q4_0', id: 'tiny', quant: 'Q4_0', fileName: 't.gguf', state: 'downloading', done: 50, total: 100, speed: 10, etaSec: 5 });
    await vi.waitFor(() => expect(screen.getByTestId('download-progress').getAttribute('aria-valuenow')).toBe('50'));
    await fireEvent.click(screen.getByTestId('download-cancel'));
    expect(engine.cancelDownload).toHaveBeenCalledWith('tiny', 'Q4_0');
    off();
  });
});

describe('header', () => {
  it('shows the demo model with its badge and note, and its name opens Models', async () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ demo: true, name: 'nibble-demo' }) };
    ui.tab = 'chat';
    render(Header);
    expect(screen.getByTestId('model-name').textContent).toContain('Demo model');
    expect(screen.getByTestId('demo-badge')).toBeTruthy();
    expect(screen.getByTestId('demo-note').textContent).toMatch(/random weights/);
    await fireEvent.click(screen.getByTestId('model-name'));
    expect(ui.tab).toBe('models');
  });

  it('shows no demo badge for a real model, and the engine error', () => {
    engineStatus.status = { state: 'error', busy: false, running: 0, error: 'load /m/x.gguf: truncated', model: model() };
    render(Header);
    expect(screen.queryByTestId('demo-badge')).toBeNull();
    expect(screen.queryByTestId('demo-note')).toBeNull();
    expect(screen.getByTestId('engine-error').textContent).toContain('truncated');
  });
});
