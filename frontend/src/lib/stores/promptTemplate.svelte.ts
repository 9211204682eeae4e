// The prompt template editor of the Models tab: for one model file, the
// chat template in use and where it comes from, a choice of the model's
// own, a Jinja template of the user's or none (plain completion), a live
// preview of a sample conversation, and saving the choice (kept per file
// in the settings, applied to the loaded model's next reply).

import * as engine from '../engine';
import { message } from '../format';
import type { PromptTemplateInfo, TemplatePreview, TemplateProblem } from '../types';

/** What the user chose (service.Template*). */
export type TemplateMode = 'model' | 'custom' | 'none';

const formatNames: Record<string, string> = {
  chatml: 'ChatML',
  llama3: 'Llama 3',
  llama2: 'Llama 2',
  mistral: 'Mistral',
  gemma: 'Gemma',
  phi3: 'Phi-3',
};

/** formatName is a built-in format as people name it. */
export function formatName(format: string | undefined): string {
  return formatNames[format ?? ''] ?? format ?? 'built-in';
}

/** sourceLabel says where the template in use comes from. */
export function sourceLabel(info: PromptTemplateInfo): string {
  switch (info.source) {
    case 'file':
      return "The model file's own template (tokenizer.chat_template)";
    case 'builtin':
      return info.fileProblem
        ? `Built-in ${formatName(info.format)} format: the file's own template does not parse`
        : `Built-in ${formatName(info.format)} format: the file has no chat template`;
    case 'custom':
      return 'Your template';
    case 'none':
      return 'None: plain completion';
  }
  return info.source;
}

/** modelChoiceLabel names the "model's own" choice for this file. */
export function modelChoiceLabel(info: PromptTemplateInfo | null): string {
  if (!info) return "The model's own";
  return info.fileTemplate && !info.fileProblem ? "The file's own" : `Built-in ${formatName(info.format)}`;
}

/** problemText puts a template problem in one line, with its place. */
export function problemText(p: TemplateProblem): string {
  if (p.line && p.column) return `Line ${p.line}, column ${p.column}: ${p.message}`;
  if (p.line) return `Line ${p.line}: ${p.message}`;
  return p.message;
}

export class PromptTemplateEditor {
  /** The model file being edited, else null (the editor is closed). */
  path = $state<string | null>(null);
  /** The template as saved (what the file uses now). */
  info = $state<PromptTemplateInfo | null>(null);
  loadError = $state<string | null>(null);
  mode = $state<TemplateMode>('model');
  /** The custom template as typed. */
  draft = $state('');
  /** The sample conversation rendered with the choice as it stands. */
  preview = $state<TemplatePreview | null>(null);
  /** Why the preview could not be asked for (not the template's own error). */
  previewError = $state<string | null>(null);
  saving = $state(false);
  saveError = $state<string | null>(null);
  /** Set by a save, cleared by the next edit. */
  justSaved = $state(false);
  /** How long typing pauses before the preview is asked for. */
  debounceMs = 250;

  #seq = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** dirty: the choice differs from what is saved. */
  get dirty(): boolean {
    if (!this.info) return false;
    if (this.mode !== this.info.mode) return true;
    return this.mode === 'custom' && this.draft !== (this.info.custom ?? '');
  }

  /** canSave: a change that can be kept (a custom template that fails cannot). */
  get canSave(): boolean {
    if (!this.dirty || this.saving || !this.info) return false;
    return !(this.mode === 'custom' && (this.preview?.error || this.draft.trim() === ''));
  }

  async open(path: string): Promise<void> {
    this.#cancelPreview();
    this.path = path;
    this.info = null;
    this.loadError = this.saveError = this.previewError = null;
    this.preview = null;
    this.justSaved = false;
    try {
      const info = await engine.promptTemplate(path);
      if (this.path !== path) return; // another file was opened meanwhile
      this.#take(info);
    } catch (e) {
      if (this.path === path) this.loadError = message(e);
    }
  }

  close(): void {
    this.#cancelPreview();
    this.path = null;
    this.info = null;
    this.preview = null;
  }

  /** toggle opens the editor for path, or closes it when it is open there. */
  async toggle(path: string): Promise<void> {
    if (this.path === path) this.close();
    else await this.open(path);
  }

  setMode(mode: TemplateMode): void {
    this.mode = mode;
    this.justSaved = false;
    this.saveError = null;
    if (mode === 'custom' && this.draft === '' && this.info) {
      this.draft = this.info.custom || this.info.modelTemplate; // start from what the model uses
    }
    this.#schedulePreview(0);
  }

  /** edit takes the custom template as typed and previews it once typing pauses. */
  edit(text: string): void {
    this.draft = text;
    this.mode = 'custom';
    this.justSaved = false;
    this.saveError = null;
    this.#schedulePreview(this.debounceMs);
  }

  /** refreshPreview asks for the preview now; a later request wins over an earlier one. */
  async refreshPreview(): Promise<void> {
    const path = this.path;
    if (path === null) return;
    const seq = ++this.#seq;
    try {
      const pv = await engine.previewPromptTemplate({ path, mode: this.mode, source: this.mode === 'custom' ? this.draft : '' });
      if (seq !== this.#seq) return;
      this.preview = pv;
      this.previewError = null;
    } catch (e) {
      if (seq !== this.#seq) return;
      this.previewError = message(e);
    }
  }

  async save(): Promise<boolean> {
    const path = this.path;
    if (path === null || !this.canSave) return false;
    this.saving = true;
    this.saveError = null;
    try {
      const info =
        this.mode === 'model'
          ? await engine.clearPromptTemplate(path)
          : await engine.savePromptTemplate({ path, mode: this.mode, source: this.mode === 'custom' ? this.draft : '' });
      if (this.path === path) {
        this.#take(info);
        this.justSaved = true;
      }
      return true;
    } catch (e) {
      this.saveError = message(e);
      return false;
    } finally {
      this.saving = false;
    }
  }

  #take(info: PromptTemplateInfo): void {
    this.#cancelPreview();
    this.info = info;
    this.mode = (info.mode as TemplateMode) || 'model';
    this.draft = info.custom ?? '';
    this.preview = info.preview;
    this.previewError = null;
  }

  #schedulePreview(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.refreshPreview(), ms);
  }

  #cancelPreview(): void {
    clearTimeout(this.#timer);
    this.#seq++; // answers to earlier requests are dropped
  }
}

export const promptTemplate = new PromptTemplateEditor();
