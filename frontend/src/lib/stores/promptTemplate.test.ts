import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { deferred, must } from '../../test/fakeEngine';
import PromptTemplatePanel from '../components/PromptTemplatePanel.svelte';
import type { PromptTemplateInfo, TemplatePreview } from '../types';
import { problemText, PromptTemplateEditor, promptTemplate, sourceLabel } from './promptTemplate.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const getInfo = vi.mocked(engine.promptTemplate);
const previewOf = vi.mocked(engine.previewPromptTemplate);
const save = vi.mocked(engine.savePromptTemplate);
const clear = vi.mocked(engine.clearPromptTemplate);

const shown = (text: string): TemplatePreview => ({ parts: [{ text: '<s>', special: true }, { text }], text: '<s>' + text, tokens: 9 });
const failing = (message: string, line = 0, column = 0): TemplatePreview => ({ parts: [], text: '', tokens: 0, error: { message, line, column } });

function info(over: Partial<PromptTemplateInfo> = {}): PromptTemplateInfo {
  return {
    path: '/m/a.gguf',
    mode: 'model',
    source: 'builtin',
    format: 'llama2',
    template: '{{ llama2 }}',
    modelTemplate: '{{ llama2 }}',
    loaded: true,
    sample: [],
    preview: shown('[INST] hi [/INST]'),
    ...over,
  };
}

let ed: PromptTemplateEditor;
beforeEach(() => {
  vi.clearAllMocks();
  vi.useRealTimers();
  ed = new PromptTemplateEditor();
  ed.debounceMs = 0;
  getInfo.mockResolvedValue(info());
});

describe('prompt template editor store', () => {
  it('opens on the template in use and says where it comes from', async () => {
    await ed.open('/m/a.gguf');
    expect(getInfo).toHaveBeenCalledWith('/m/a.gguf');
    expect(ed.mode).toBe('model');
    expect(ed.preview?.text).toBe('<s>[INST] hi [/INST]');
    expect(sourceLabel(must(ed.info))).toBe('Built-in Llama 2 format: the file has no chat template');
    expect(sourceLabel(info({ source: 'file' }))).toMatch(/file's own/);
    expect(sourceLabel(info({ source: 'none' }))).toBe('None: plain completion');
    expect(ed.dirty).toBe(false);
    expect(ed.canSave).toBe(false);
  });

  it('previews a custom template as it is typed, the last answer winning', async () => {
    await ed.open('/m/a.gguf');
    const slow = deferred<TemplatePreview>();
    previewOf.mockReturnValueOnce(slow.promise).mockResolvedValueOnce(shown('### user: hi'));
    ed.edit('{{ x');
    await vi.waitFor(() => expect(previewOf).toHaveBeenCalledTimes(1));
    ed.edit('{% for m in messages %}### {{ m.role }}: {{ m.content }}{% endfor %}');
    await vi.waitFor(() => expect(ed.preview?.text).toBe('<s>### user: hi'));
    slow.resolve(failing('unexpected end', 1, 4)); // answered late: ignored
    await Promise.resolve();
    expect(ed.preview?.text).toBe('<s>### user: hi');
    expect(previewOf).toHaveBeenLastCalledWith({ path: '/m/a.gguf', mode: 'custom', source: '{% for m in messages %}### {{ m.role }}: {{ m.content }}{% endfor %}' });
    expect(ed.mode).toBe('custom');
    expect(ed.canSave).toBe(true);
  });

  it('will not save a template whose preview fails, and says where it fails', async () => {
    await ed.open('/m/a.gguf');
    previewOf.mockResolvedValue(failing("Unexpected EOF, expected tag else or endfor.", 2, 16));
    ed.edit('{% for m in messages %}\n{{ m.content }}');
    await vi.waitFor(() => expect(ed.preview?.error).toBeTruthy());
    expect(problemText(must(ed.preview?.error))).toBe('Line 2, column 16: Unexpected EOF, expected tag else or endfor.');
    expect(ed.canSave).toBe(false);
    expect(await ed.save()).toBe(false);
    expect(save).not.toHaveBeenCalled();
  });

  it('starts a custom template from the one in use, saves it, then none, then the model\'s own', async () => {
    await ed.open('/m/a.gguf');
    previewOf.mockResolvedValue(shown('x'));
    ed.setMode('custom');
    expect(ed.draft).toBe('{{ llama2 }}');
    ed.edit('{{ messages[0].content }}');
    await vi.waitFor(() => expect(ed.canSave).toBe(true));
    save.mockResolvedValueOnce(info({ mode: 'custom', source: 'custom', custom: '{{ messages[0].content }}', preview: shown('mine') }));
    expect(await ed.save()).toBe(true);
    expect(save).toHaveBeenCalledWith({ path: '/m/a.gguf', mode: 'custom', source: '{{ messages[0].content }}' });
    expect(ed.justSaved).toBe(true);
    expect(ed.dirty).toBe(false);
    expect(ed.preview?.text).toBe('<s>mine');

    ed.setMode('none');
    await vi.waitFor(() => expect(previewOf).toHaveBeenLastCalledWith({ path: '/m/a.gguf', mode: 'none', source: '' }));
    save.mockResolvedValueOnce(info({ mode: 'none', source: 'none' }));
    expect(await ed.save()).toBe(true);
    expect(save).toHaveBeenLastCalledWith({ path: '/m/a.gguf', mode: 'none', source: '' });

    ed.setMode('model');
    clear.mockResolvedValueOnce(info());
    expect(await ed.save()).toBe(true);
    expect(clear).toHaveBeenCalledWith('/m/a.gguf');
    expect(ed.mode).toBe('model');
  });

  it('shows a refused save', async () => {
    await ed.open('/m/a.gguf');
    previewOf.mockResolvedValue(shown('x'));
    ed.edit('{{ messages[0].content }}');
    await vi.waitFor(() => expect(ed.canSave).toBe(true));
    save.mockRejectedValueOnce(new Error('settings.json cannot be written'));
    expect(await ed.save()).toBe(false);
    expect(ed.saveError).toBe('settings.json cannot be written');
    expect(ed.saving).toBe(false);
  });

  it('says why the template could not be read', async () => {
    getInfo.mockRejectedValueOnce(new Error('prompt template: a.gguf: the file is missing'));
    await ed.open('/m/a.gguf');
    expect(ed.loadError).toMatch(/missing/);
    expect(ed.info).toBeNull();
  });
});

describe('prompt template panel', () => {
  it('shows the source, the preview with its special tokens and the error of a broken template', async () => {
    await promptTemplate.open('/m/a.gguf');
    promptTemplate.debounceMs = 0;
    render(PromptTemplatePanel);
    expect(screen.getByTestId('template-source').textContent).toMatch(/Built-in Llama 2/);
    expect(screen.getByTestId('template-special').textContent).toBe('<s>');
    expect(screen.getByTestId('template-preview').textContent).toBe('<s>[INST] hi [/INST]');
    previewOf.mockResolvedValue(failing("filter 'nosuch' not found", 3));
    await fireEvent.click(screen.getByTestId('template-mode-custom'));
    const editor = screen.getByTestId('template-editor') as HTMLTextAreaElement;
    expect(editor.value).toBe('{{ llama2 }}');
    await fireEvent.input(editor, { target: { value: '{{ x | nosuch }}' } });
    await vi.waitFor(() => expect(screen.getByTestId('template-error').textContent).toBe("Line 3: filter 'nosuch' not found"));
    expect((screen.getByTestId('template-save') as HTMLButtonElement).disabled).toBe(true);
    expect(screen.queryByTestId('template-preview')).toBeNull();
  });
});
