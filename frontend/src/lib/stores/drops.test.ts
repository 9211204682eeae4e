import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { Drops, pathWaitMs } from './drops.svelte';
import { models } from './models.svelte';
import { ui } from './ui.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const addModel = vi.mocked(engine.addModel);
let drops: Drops;

beforeEach(() => {
  vi.clearAllMocks();
  ui.tab = 'chat';
  models.list = [];
  models.addError = null;
  drops = new Drops();
});

afterEach(() => {
  vi.useRealTimers();
});

const local = (path: string) => ({ path, name: 'Tiny', source: 'added', arch: 'llama', fileType: 'Q4_0', size: 1, params: 1, ctxTrain: 2048, loaded: false, demo: false, tokPerSec: 0 });

describe('drops', () => {
  it('shows the drop zone while files are dragged over the window', () => {
    drops.dragEnter(['Files']);
    drops.dragEnter(['Files']); // entering a child element
    drops.dragLeave();
    expect(drops.dragging).toBe(true);
    drops.dragLeave();
    expect(drops.dragging).toBe(false);
    drops.dragEnter(['text/plain']); // dragging text, not files
    expect(drops.dragging).toBe(false);
  });

  it('adds a dropped .gguf file and shows it in Models', async () => {
    addModel.mockImplementation(async (p) => local(p));
    drops.dragEnter(['Files']);
    await drops.paths(['/Users/me/Downloads/tiny.GGUF']);
    expect(addModel).toHaveBeenCalledWith('/Users/me/Downloads/tiny.GGUF');
    expect(ui.tab).toBe('models');
    expect(models.list.map((m) => m.path)).toEqual(['/Users/me/Downloads/tiny.GGUF']);
    expect(drops.dragging).toBe(false);
  });

  it('says why a dropped file was refused', async () => {
    addModel.mockRejectedValueOnce(new Error('not a GGUF file'));
    await drops.paths(['/tmp/bad.gguf']);
    expect(models.addError).toBe('bad.gguf: not a GGUF file');
    addModel.mockRejectedValueOnce(new Error('cannot add cut.gguf: cut short'));
    await drops.paths(['/tmp/cut.gguf']);
    expect(models.addError).toBe('cannot add cut.gguf: cut short');
  });

  it('hands other files to the documents handler, not to the models', async () => {
    const handler = vi.fn();
    const off = drops.onDocuments(handler);
    await drops.paths(['/tmp/notes.pdf', '/tmp/tiny.gguf']);
    expect(handler).toHaveBeenCalledWith([{ name: 'notes.pdf', path: '/tmp/notes.pdf' }]);
    expect(addModel).toHaveBeenCalledTimes(1);
    off();
    await drops.paths(['/tmp/more.txt']);
    expect(handler).toHaveBeenCalledTimes(1);
    expect(ui.tab).toBe('models'); // from the .gguf only
  });

  it('leaves documents alone while no handler is registered', async () => {
    await drops.paths(['/tmp/notes.pdf']);
    expect(addModel).not.toHaveBeenCalled();
    expect(ui.tab).toBe('chat');
    expect(drops.notice).toBeNull();
  });

  it('explains a browser drop, which has no paths', async () => {
    vi.useFakeTimers();
    drops.files([new File(['x'], 'tiny.gguf')]);
    await vi.advanceTimersByTimeAsync(pathWaitMs);
    expect(addModel).not.toHaveBeenCalled();
    expect(drops.notice).toMatch(/tiny\.gguf.*Open GGUF file/);
    expect(ui.tab).toBe('models');
  });

  it('takes the app\'s paths that follow a DOM drop, without the browser notice', async () => {
    vi.useFakeTimers();
    addModel.mockImplementation(async (p) => local(p));
    drops.files([new File(['x'], 'tiny.gguf')]);
    await drops.paths(['/m/tiny.gguf']);
    await vi.advanceTimersByTimeAsync(pathWaitMs * 2);
    expect(addModel).toHaveBeenCalledWith('/m/tiny.gguf');
    expect(drops.notice).toBe('Added Tiny.');
  });

  it('takes the app\'s paths that come before the DOM drop, without the browser notice', async () => {
    vi.useFakeTimers();
    addModel.mockImplementation(async (p) => local(p));
    await drops.paths(['/m/tiny.gguf']);
    drops.files([new File(['x'], 'tiny.gguf')]);
    await vi.advanceTimersByTimeAsync(pathWaitMs * 2);
    expect(drops.notice).toBe('Added Tiny.');
  });
});
