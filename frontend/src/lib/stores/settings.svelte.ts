// The Settings tab: the form's fields (as typed), saving them through
// UpdateSettings, the errors it names by field, and the theme.

import * as engine from '../engine';
import { message, messageLines } from '../format';
import type { KVType, Settings as SettingsData } from '../types';

export type Theme = 'system' | 'light' | 'dark';

/** What a load does when its context's KV cache does not fit. */
export type WhenTooLong = 'refuse' | 'evict';

/** The form as typed: numbers stay text until Save reads them. */
export interface Form {
  systemPrompt: string;
  temperature: string;
  context: string;
  kv: KVType;
  /** The memory limit in memoryUnit (0 = automatic). */
  memory: string;
  memoryUnit: MemoryUnit;
  theme: Theme;
  /** The largest document file, in MiB. */
  documentMiB: string;
  whenTooLong: WhenTooLong;
  /** The longest reply, in tokens (0 = no limit). */
  maxReply: string;
}

/** The JSON fields of settings.Settings each form field sets. */
export const fieldNames: Record<keyof Form, string> = {
  systemPrompt: 'systemPrompt',
  temperature: 'sampling.temperature',
  context: 'contextTokens',
  kv: 'kvType',
  memory: 'memoryLimit',
  memoryUnit: 'memoryLimit',
  theme: 'theme',
  documentMiB: 'documentMaxBytes',
  whenTooLong: 'whenContextDoesNotFit',
  maxReply: 'maxReplyTokens',
};

const GiB = 2 ** 30;

/** giB shows a byte count in GiB with up to three decimals. */
export function giB(bytes: number): string {
  return String(Math.round((bytes / GiB) * 1000) / 1000);
}

const MiB = 2 ** 20;

/** The units the memory limit is typed in. */
export const memoryUnits = ['MiB', 'GiB'] as const;
export type MemoryUnit = (typeof memoryUnits)[number];
const unitBytes: Record<MemoryUnit, number> = { MiB, GiB };

/**
 * memoryField shows a memory limit in the unit that reads best: GiB from
 * one GiB up (and for 0, automatic), MiB below.
 */
export function memoryField(bytes: number): { value: string; unit: MemoryUnit } {
  if (bytes === 0 || bytes >= GiB) return { value: giB(bytes), unit: 'GiB' };
  return { value: miB(bytes), unit: 'MiB' };
}
/** The documents' size limit when the settings leave it at 0. */
export const defaultDocumentBytes = 16 * MiB;

/** miB shows a byte count in MiB with up to one decimal. */
export function miB(bytes: number): string {
  return String(Math.round((bytes / MiB) * 10) / 10);
}

/** applyTheme sets the page's colours: the system's, or the one chosen. */
export function applyTheme(theme: string): void {
  const root = document.documentElement;
  if (theme === 'light' || theme === 'dark') root.dataset.theme = theme;
  else delete root.dataset.theme;
}

export class Settings {
  /** What the Go side has in force. */
  saved = $state<SettingsData | null>(null);
  form = $state<Form>({ systemPrompt: '', temperature: '', context: '', kv: 'auto', memory: '0', memoryUnit: 'GiB', theme: 'system', documentMiB: '16', whenTooLong: 'refuse', maxReply: '2048' });
  loadError = $state<string | null>(null);
  /** Every line of the last refusal, else empty. */
  errors = $state<string[]>([]);
  /** The form fields the refusal names. */
  badFields = $state<Partial<Record<keyof Form, string>>>({});
  saving = $state(false);
  /** Set by a successful save, cleared by the next edit. */
  justSaved = $state(false);

  async load(): Promise<void> {
    try {
      this.#take(await engine.getSettings());
      this.loadError = null;
    } catch (e) {
      this.loadError = message(e);
    }
  }

  #take(s: SettingsData): void {
    this.saved = s;
    const memory = memoryField(s.memoryLimit ?? 0);
    this.form = {
      systemPrompt: s.systemPrompt ?? '',
      temperature: String(s.sampling?.temperature ?? ''),
      context: String(s.contextTokens ?? ''),
      kv: (s.kvType || 'auto') as KVType,
      memory: memory.value,
      memoryUnit: memory.unit,
      theme: (s.theme || 'system') as Theme,
      documentMiB: miB(s.documentMaxBytes || defaultDocumentBytes),
      whenTooLong: s.whenContextDoesNotFit === 'evict' ? 'evict' : 'refuse',
      maxReply: String(s.maxReplyTokens ?? 0),
    };
    applyTheme(s.theme);
  }

  /** edited is called on any change of the form. */
  edited(): void {
    this.justSaved = false;
  }

  /** read turns the form into settings, or names the fields it cannot read. */
  #read(base: SettingsData): { value?: SettingsData; bad: Partial<Record<keyof Form, string>> } {
    const bad: Partial<Record<keyof Form, string>> = {};
    const f = this.form;
    const num = (k: keyof Form, text: string): number => {
      const v = text.trim() === '' ? NaN : Number(text);
      if (!Number.isFinite(v)) bad[k] = `${fieldNames[k]}: "${text}" is not a number`;
      return v;
    };
    const temperature = num('temperature', f.temperature);
    const context = num('context', f.context);
    if (!bad.context && !Number.isInteger(context)) bad.context = `${fieldNames.context}: ${f.context} is not a whole number of tokens`;
    const memory = num('memory', f.memory);
    if (!bad.memory && memory < 0) bad.memory = `${fieldNames.memory}: ${f.memory} ${f.memoryUnit} is negative (0 = automatic)`;
    const docMiB = num('documentMiB', f.documentMiB);
    if (!bad.documentMiB && !(docMiB > 0)) bad.documentMiB = `${fieldNames.documentMiB}: ${f.documentMiB} MiB: want more than 0`;
    const maxReply = num('maxReply', f.maxReply);
    if (!bad.maxReply && !(Number.isInteger(maxReply) && maxReply >= 0))
      bad.maxReply = `${fieldNames.maxReply}: ${f.maxReply} is not a whole number of tokens (0 = no limit)`;
    if (Object.keys(bad).length > 0) return { bad };
    // An untouched limit keeps its exact bytes (the field shows it rounded).
    const shown = memoryField(base.memoryLimit ?? 0);
    const limit = f.memory === shown.value && f.memoryUnit === shown.unit ? base.memoryLimit : Math.round(memory * unitBytes[f.memoryUnit]);
    return {
      bad,
      value: {
        ...base,
        systemPrompt: f.systemPrompt,
        sampling: { ...base.sampling, temperature },
        contextTokens: context,
        kvType: f.kv,
        memoryLimit: limit,
        theme: f.theme,
        whenContextDoesNotFit: f.whenTooLong,
        maxReplyTokens: maxReply,
        // An untouched limit keeps its exact bytes, as the memory limit does.
        documentMaxBytes:
          f.documentMiB === miB(base.documentMaxBytes || defaultDocumentBytes) ? base.documentMaxBytes : Math.round(docMiB * MiB),
      },
    };
  }

  /**
   * change saves a section's fields (Quick actions, Local server) over the
   * settings as the Go side has them, not over this form, so the other
   * sections' unsaved fields are neither saved nor undone; saved follows.
   */
  async change(edit: (current: SettingsData) => SettingsData): Promise<SettingsData> {
    const saved = await engine.updateSettings(edit(await engine.getSettings()));
    this.saved = saved;
    return saved;
  }

  async save(): Promise<boolean> {
    this.justSaved = false;
    const base = this.saved;
    if (!base) {
      this.errors = [this.loadError ?? 'the settings are not loaded yet'];
      return false;
    }
    const { value, bad } = this.#read(base);
    if (!value) {
      this.badFields = bad;
      this.errors = Object.values(bad);
      return false;
    }
    this.saving = true;
    try {
      this.#take(await engine.updateSettings(value));
      this.errors = [];
      this.badFields = {};
      this.justSaved = true;
      return true;
    } catch (e) {
      this.errors = messageLines(e);
      this.badFields = {};
      for (const [k, name] of Object.entries(fieldNames) as [keyof Form, string][]) {
        const line = this.errors.find((l) => l.includes(`${name}:`));
        if (line) this.badFields[k] = line;
      }
      return false;
    } finally {
      this.saving = false;
    }
  }
}

export const settings = new Settings();
