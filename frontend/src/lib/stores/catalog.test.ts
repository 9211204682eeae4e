import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { estimate, emit } from '../../test/fakeEngine';
import type { CatalogEntry, Download } from '../types';
import { Catalog } from './catalog.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const entry: CatalogEntry = {
  id: 'tiny',
  name: 'Tiny',
  family: 'llama',
  paramsB: 1.1,
  ctxTrain: 2048,
  runnable: true,
  files: [{ quant: 'Q4_0', fileName: 'tiny.gguf', url: 'http://x/tiny.gguf', size: 100, sizeApprox: false, estimate: estimate({ approx: true }) }],
};

const dl = (over: Partial<Download>): Download => ({
  key: 'tiny/Q4_0',
  id: 'tiny',
  quant: 'Q4_0',
  fileName: 'tiny.gguf',
  state: 'downloading',
  done: 0,
  total: 100,
  speed: 0,
  etaSec: 0,
  ...over,
});

let catalog: Catalog;
let off: (() => void) | undefined;

beforeEach(async () => {
  off?.();
  vi.clearAllMocks();
  vi.mocked(engine.catalog).mockResolvedValue([entry]);
  catalog = new Catalog();
  off = catalog.connect();
  await vi.waitFor(() => expect(catalog.loaded).toBe(true));
});

describe('catalog store', () => {
  it('follows download:progress', () => {
    emit('download:progress', dl({ done: 40 }));
    expect(catalog.downloads['tiny/Q4_0']?.done).toBe(40);
    emit('download:progress', dl({ done: 80 }));
    expect(catalog.downloads['tiny/Q4_0']?.done).toBe(80);
  });

  it('keeps progress that beat the answer of Download', async () => {
    vi.mocked(engine.download).mockImplementationOnce(async () => {
      emit('download:progress', dl({ done: 50 }));
      return dl({ state: 'starting', done: 0 });
    });
    await catalog.download('tiny', 'Q4_0');
    expect(engine.download).toHaveBeenCalledWith('tiny', 'Q4_0');
    expect(catalog.downloads['tiny/Q4_0']?.done).toBe(50);
  });

  it('reads the catalog again when a download ends, for its local path', async () => {
    expect(engine.catalog).toHaveBeenCalledTimes(1);
    emit('download:progress', dl({ done: 50 }));
    emit('download:progress', dl({ state: 'done', done: 100, path: '/m/tiny.gguf' }));
    await vi.waitFor(() => expect(engine.catalog).toHaveBeenCalledTimes(2));
  });

  it('says why a download did not start, until it is tried again', async () => {
    vi.mocked(engine.download).mockRejectedValueOnce(new Error('disk full'));
    await catalog.download('tiny', 'Q4_0');
    expect(catalog.startErrors['tiny/Q4_0']).toBe('disk full');
    vi.mocked(engine.download).mockResolvedValueOnce(dl({ state: 'starting' }));
    await catalog.download('tiny', 'Q4_0');
    expect(catalog.startErrors['tiny/Q4_0']).toBeFalsy();
  });

  it('reads the exact estimate from the header', async () => {
    vi.mocked(engine.catalogEstimate).mockResolvedValueOnce(estimate({ approx: false, total: 123 }));
    const reading = catalog.readExact('tiny', 'Q4_0');
    expect(catalog.exact['tiny/Q4_0']?.busy).toBe(true);
    await reading;
    expect(catalog.exact['tiny/Q4_0']?.estimate?.total).toBe(123);
    vi.mocked(engine.catalogEstimate).mockRejectedValueOnce(new Error('range requests refused'));
    await catalog.readExact('tiny', 'Q4_0');
    expect(catalog.exact['tiny/Q4_0']?.error).toBe('range requests refused');
  });
});
