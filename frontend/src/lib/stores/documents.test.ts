import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { emit, settings as savedSettings } from '../../test/fakeEngine';
import type { DocumentInfo } from '../types';
import { base64, Documents } from './documents.svelte';
import { settings } from './settings.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const attachFile = vi.mocked(engine.attachDocumentFile);
const attachData = vi.mocked(engine.attachDocumentData);
const describeDocs = vi.mocked(engine.documents);
let docs: Documents;
let off: () => void;

function info(over: Partial<DocumentInfo> = {}): DocumentInfo {
  return { id: 'd1', name: 'report.pdf', kind: '', size: 1000, state: 'reading', progress: 0, pages: 0, lines: 0, tokens: 0, whole: false, ...over };
}

beforeEach(() => {
  vi.clearAllMocks();
  describeDocs.mockResolvedValue([]);
  settings.saved = null;
  off?.();
  docs = new Documents();
  off = docs.connect();
});

describe('documents', () => {
  it('attaches a dropped path, follows its reading and asks how it fits once read', async () => {
    attachFile.mockResolvedValue(info());
    await docs.add([{ name: 'report.pdf', path: '/Users/ann/report.pdf' }]);
    expect(attachFile).toHaveBeenCalledWith('/Users/ann/report.pdf');
    expect(docs.items.map((d) => d.state)).toEqual(['reading']);
    expect(docs.reading).toBe(true);
    emit('document:changed', info({ stage: 'counting tokens', progress: 0.7 }));
    expect(docs.items[0]?.progress).toBe(0.7);
    const ready = info({ state: 'ready', kind: 'pdf', pages: 4, tokens: 2100, progress: 1 });
    describeDocs.mockResolvedValue([{ ...ready, whole: true, fit: 'fits whole in 4K context with int4 KV' }]);
    emit('document:changed', ready);
    await vi.waitFor(() => expect(docs.items[0]?.fit).toBe('fits whole in 4K context with int4 KV'));
    expect(describeDocs).toHaveBeenCalledWith(['d1']);
    expect(docs.ids).toEqual(['d1']);
    expect(docs.reading).toBe(false);
  });

  it('catches up with a document read before its attach call answered', async () => {
    attachData.mockImplementation(async () => {
      emit('document:changed', info({ id: 'd9', state: 'ready' })); // before the answer: no chip to update yet
      return info({ id: 'd9' });
    });
    describeDocs.mockResolvedValue([info({ id: 'd9', state: 'ready', tokens: 12, fit: 'fits whole in 4K context with int4 KV' })]);
    await docs.add([{ name: 'quick.txt', file: new File(['hi'], 'quick.txt') }]);
    expect(docs.items[0]).toMatchObject({ id: 'd9', state: 'ready', tokens: 12 });
  });

  it("sends a browser drop's bytes as base64", async () => {
    attachData.mockResolvedValue(info({ id: 'd2', name: 'notes.txt' }));
    const file = new File(['héllo\n'], 'notes.txt', { type: 'text/plain' });
    await docs.add([{ name: 'notes.txt', file }]);
    const [name, data] = attachData.mock.calls[0] ?? [];
    expect(name).toBe('notes.txt');
    expect(new TextDecoder().decode(Uint8Array.from(atob(data ?? ''), (c) => c.charCodeAt(0)))).toBe('héllo\n');
  });

  it('refuses a file over the size limit with a red chip, keeping the others', async () => {
    attachData.mockResolvedValue(info({ id: 'd3', name: 'small.txt' }));
    settings.saved = savedSettings({ documentMaxBytes: 10 });
    await docs.add([
      { name: 'big.txt', file: new File(['x'.repeat(2048)], 'big.txt') },
      { name: 'small.txt', file: new File(['tiny'], 'small.txt') },
    ]);
    const big = docs.items.find((d) => d.name === 'big.txt');
    expect(big?.state).toBe('error');
    expect(big?.error).toBe('big.txt: the file is 2 KiB, over the 1 KiB limit for documents (Settings › Largest document)');
    expect(docs.items.find((d) => d.name === 'small.txt')?.state).toBe('reading');
    expect(docs.ids).toEqual(['d3']); // the failed one is not asked about
    expect(attachData).toHaveBeenCalledTimes(1);
  });

  it('shows an attach that fails as a red chip with the message', async () => {
    attachFile.mockRejectedValue(new Error('attach a document: "x" is not an absolute path'));
    await docs.add([{ name: 'x', path: 'x' }]);
    expect(docs.items[0]).toMatchObject({ name: 'x', state: 'error', error: 'attach a document: "x" is not an absolute path' });
    await docs.remove(docs.items[0]?.id ?? '');
    expect(docs.items).toEqual([]);
    expect(engine.removeDocument).not.toHaveBeenCalled(); // it never reached the Go side
  });

  it('removes a document on both sides, and clear detaches them all', async () => {
    attachFile.mockResolvedValueOnce(info({ id: 'a' })).mockResolvedValueOnce(info({ id: 'b' }));
    await docs.add([{ name: 'a.txt', path: '/a.txt' }]);
    await docs.add([{ name: 'b.txt', path: '/b.txt' }]);
    await docs.remove('a');
    expect(engine.removeDocument).toHaveBeenCalledWith('a');
    expect(docs.ids).toEqual(['b']);
    docs.clear();
    expect(engine.removeDocument).toHaveBeenCalledWith('b');
    expect(docs.items).toEqual([]);
    emit('document:changed', info({ id: 'b', state: 'ready' })); // a late event of a cleared document
    expect(docs.items).toEqual([]);
  });

  it('encodes large files in pieces', async () => {
    const bytes = new Uint8Array(40_000).map((_, i) => i % 256);
    const b = await base64(new Blob([bytes]));
    expect(Uint8Array.from(atob(b), (c) => c.charCodeAt(0))).toEqual(bytes);
  });
});
