import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { model } from '../../test/fakeEngine';
import { chat } from '../stores/chat.svelte';
import { documents } from '../stores/documents.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import type { DocumentInfo } from '../types';
import Conversation from './Conversation.svelte';
import DocumentTray from './DocumentTray.svelte';
import PromptBox from './PromptBox.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const ready: DocumentInfo = {
  id: 'd1',
  name: 'report.pdf',
  kind: 'pdf',
  size: 5000,
  state: 'ready',
  progress: 1,
  pages: 4,
  lines: 80,
  tokens: 2100,
  whole: true,
  fit: 'fits whole in 4K context with int4 KV',
};

beforeEach(() => {
  vi.clearAllMocks();
  chat.newChat();
  documents.items = [];
  engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
});

describe('document tray', () => {
  it('shows name, pages, tokens and how each document fits; errors in red; remove', async () => {
    vi.mocked(engine.documents).mockResolvedValue([ready]);
    documents.items = [
      ready,
      { ...ready, id: 'd2', name: 'big.md', kind: 'markdown', pages: 0, lines: 12000, tokens: 150000, whole: false, fit: 'too large: answering from the most relevant parts' },
      { ...ready, id: 'd3', name: 'locked.pdf', state: 'error', error: 'locked.pdf: document is encrypted', fit: undefined },
      { ...ready, id: 'd4', name: 'huge.txt', state: 'reading', stage: 'counting tokens', progress: 0.5 },
    ];
    render(DocumentTray);
    await fireEvent.click(screen.getByTestId('document-more')); // the fourth is counted until asked for
    const chips = screen.getAllByTestId('document-chip');
    expect(chips.map((c) => c.dataset.state)).toEqual(['ready', 'ready', 'error', 'reading']);
    expect(chips[0]?.textContent).toContain('PDF · 4 pages · 2,100 tokens');
    expect(chips[0]?.textContent).toContain('fits whole in 4K context with int4 KV');
    expect(chips[1]?.textContent).toContain('Markdown · 12,000 lines · 150,000 tokens');
    expect(chips[1]?.textContent).toContain('too large: answering from the most relevant parts');
    expect(chips[2]?.textContent).toContain('locked.pdf: document is encrypted');
    expect(chips[3]?.textContent).toContain('Reading… counting tokens');
    expect(screen.getByTestId('document-progress').getAttribute('value')).toBe('50');
    await fireEvent.click(screen.getAllByTestId('document-remove')[2] as HTMLElement);
    expect(screen.getAllByTestId('document-chip')).toHaveLength(3);
    expect(engine.removeDocument).toHaveBeenCalledWith('d3');
  });

  it('asks about the documents and shows the sources under the answer', async () => {
    documents.items = [ready];
    vi.mocked(engine.send).mockResolvedValue({
      replyId: 'r1',
      conversationId: 1,
      sources: [{ number: 1, documentId: 'd1', document: 'report.pdf', whole: false, label: 'page 4', firstPage: 4, lastPage: 4 }],
      documents: [{ documentId: 'd1', name: 'report.pdf', whole: false, sections: 20, used: 3, status: 'too large: answering from the most relevant parts (3 of 20 sections)' }],
    });
    render(Conversation);
    render(PromptBox);
    chat.setDraft('What did Q3 earn?');
    await chat.submit();
    expect(engine.send).toHaveBeenCalledWith([{ role: 'user', content: 'What did Q3 earn?' }], 0, 0, ['d1'], false, '');
    await vi.waitFor(() => expect(screen.getByTestId('source-chip').textContent).toBe('[1] report.pdf, page 4'));
    expect(screen.getByTestId('document-use').textContent).toBe('report.pdf: too large: answering from the most relevant parts (3 of 20 sections)');
  });

  it('shows the kept sources of a restored answer', async () => {
    chat.restore({
      id: 4,
      title: 'Q3',
      model: 'Tiny',
      messages: [
        { role: 'user', content: 'What did Q3 earn?' },
        { role: 'assistant', content: '4 M [1]', sources: [{ number: 1, documentId: '', document: 'report.pdf', whole: false, label: 'page 4' }] },
      ],
    });
    render(Conversation);
    expect(screen.getByTestId('source-chip').textContent).toBe('[1] report.pdf, page 4');
    expect(screen.queryByTestId('document-use')).toBeNull();
  });
});

describe('document tray with many documents', () => {
  const many = (n: number): DocumentInfo[] => Array.from({ length: n }, (_, i) => ({ ...ready, id: `d${String(i + 1)}`, name: `notes-${String(i + 1)}.txt`, kind: 'text', pages: 0 }));

  it('shows three chips and a count of the rest, which expands to all of them', async () => {
    vi.mocked(engine.documents).mockImplementation(async (ids) => documents.items.filter((d) => ids.includes(d.id)));
    documents.items = [...many(4), { ...ready, id: 'd5', name: 'locked.pdf', state: 'error', error: 'locked.pdf: document is encrypted' }];
    render(DocumentTray);
    expect(screen.getAllByTestId('document-name').map((n) => n.textContent)).toEqual(['notes-1.txt', 'notes-2.txt', 'notes-3.txt']);
    const more = screen.getByTestId('document-more');
    expect(more.textContent).toBe('+2 more · 1 failed');
    await fireEvent.click(more);
    expect(screen.getAllByTestId('document-chip')).toHaveLength(5);
    expect(screen.queryByTestId('document-more')).toBeNull();
    await fireEvent.click(screen.getByTestId('document-fewer'));
    expect(screen.getAllByTestId('document-chip')).toHaveLength(3);
  });

  it('shows up to three chips without a count', () => {
    documents.items = many(3);
    render(DocumentTray);
    expect(screen.getAllByTestId('document-chip')).toHaveLength(3);
    expect(screen.queryByTestId('document-more')).toBeNull();
  });

  it('says when a reopened document comes from the copy kept with the conversation', () => {
    documents.items = [{ ...ready, note: 'report.pdf has changed since it was attached: answering from the copy kept with this conversation' }];
    render(DocumentTray);
    expect(screen.getByTestId('document-note').textContent).toContain('has changed since it was attached');
  });
});

describe('a reopened conversation', () => {
  it('brings back its documents, and a red chip for one it did not keep', async () => {
    vi.mocked(engine.documents).mockResolvedValue([ready]);
    chat.restore({
      id: 7,
      title: 'Q3',
      model: 'Tiny',
      messages: [
        { role: 'user', content: 'What did Q3 earn?' },
        { role: 'assistant', content: '4 M [1]', sources: [{ number: 1, documentId: '', document: 'report.pdf', whole: true, label: 'whole document' }] },
      ],
      documents: [{ ...ready, state: 'reading', progress: 0 }],
      documentsNotKept: ['old.txt'],
    });
    render(DocumentTray);
    await vi.waitFor(() => expect(screen.getAllByTestId('document-chip').map((c) => c.dataset.state)).toEqual(['ready', 'error']));
    expect(screen.getAllByTestId('document-chip')[1]?.textContent).toContain('old.txt was not kept with this conversation');
    expect(documents.ids).toEqual(['d1']);
    expect(vi.mocked(engine.documents).mock.calls.length).toBeLessThan(4); // asked once or twice, not in a loop
    vi.mocked(engine.send).mockResolvedValue({ replyId: 'r1', conversationId: 7 });
    chat.setDraft('And Q4?');
    await chat.submit();
    expect(engine.send).toHaveBeenCalledWith(
      [
        { role: 'user', content: 'What did Q3 earn?' },
        { role: 'assistant', content: '4 M [1]' },
        { role: 'user', content: 'And Q4?' },
      ],
      0,
      7,
      ['d1'],
      false,
      '',
    );
  });
});
