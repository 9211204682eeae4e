// Quick actions: prompt templates run on the clipboard's text (the row
// above the prompt box, the status item's menu), and their editor in
// Settings.

import { tick } from 'svelte';
import * as engine from '../engine';
import { message, messageLines } from '../format';
import type { QuickAction } from '../types';
import { chat } from './chat.svelte';
import { settings } from './settings.svelte';
import { ui } from './ui.svelte';

/** Where a quick action's template receives the text (settings.Placeholder). */
export const placeholder = '{{text}}';
/** The settings' limits (settings.MaxQuickActions, MaxQuickActionName). */
export const maxActions = 20;
export const maxNameLength = 40;

/** The actions of a fresh install (settings.Defaults). */
export const defaultActions: readonly QuickAction[] = [
  { name: 'Summarize', prompt: `Summarize the following text in a few sentences:\n\n${placeholder}` },
  { name: 'Explain', prompt: `Explain the following in simple terms:\n\n${placeholder}` },
  {
    name: 'Fix grammar',
    prompt: `Fix the grammar and spelling of the following text. Keep its meaning and tone, and reply with the corrected text only:\n\n${placeholder}`,
  },
  { name: 'Translate to English', prompt: `Translate the following text into English. Reply with the translation only:\n\n${placeholder}` },
  { name: 'Draft a reply', prompt: `Draft a short, friendly reply to the following message:\n\n${placeholder}` },
];

/** checkActions says what is wrong with each action, as Settings would refuse it; [] when all is well. */
export function checkActions(actions: readonly QuickAction[]): { index: number; msg: string }[] {
  const problems: { index: number; msg: string }[] = [];
  if (actions.length > maxActions) problems.push({ index: -1, msg: `${actions.length} actions: at most ${maxActions}` });
  // eslint-disable-next-line svelte/prefer-svelte-reactivity -- a local, not state
  const seen = new Map<string, number>();
  actions.forEach((a, i) => {
    const name = a.name.trim();
    const n = i + 1;
    if (name === '') problems.push({ index: i, msg: `Action ${n} has no name` });
    else if ([...name].length > maxNameLength) problems.push({ index: i, msg: `Action ${n}: the name has ${[...name].length} characters, at most ${maxNameLength}` });
    else if (/[\r\n]/.test(a.name)) problems.push({ index: i, msg: `Action ${n}: the name must be one line` });
    else {
      const other = seen.get(name.toLowerCase());
      if (other !== undefined) problems.push({ index: i, msg: `Action ${n}: "${name}" is also the name of action ${other + 1}` });
      else seen.set(name.toLowerCase(), i);
    }
    if (!a.prompt.includes(placeholder)) problems.push({ index: i, msg: `Action ${n}: the prompt has no ${placeholder} where the text goes` });
  });
  return problems;
}

export class QuickActions {
  /** The action running now (until its reply has started), else null. */
  running = $state<string | null>(null);
  /** Why the last action did not start, else null. */
  error = $state<string | null>(null);

  /** The editor's rows, as typed. */
  draft = $state<QuickAction[]>([]);
  /** What the last check or save refused, a line each. */
  problems = $state<string[]>([]);
  /** Indices of the rows the problems name. */
  badRows = $state<number[]>([]);
  saving = $state(false);
  justSaved = $state(false);

  /** The actions in force (the settings'). */
  get actions(): QuickAction[] {
    return settings.saved?.quickActions ?? [];
  }

  /** connect handles the status item's Quick Actions menu and the hotkey. */
  connect(): () => void {
    const offs = [
      engine.on('quickaction:run', (r) => void this.run(r.name, r.text)),
      engine.on('prompt:open', () => {
        ui.show('chat');
        // Once the chat tab has rendered its prompt box.
        void tick().then(() => document.querySelector<HTMLTextAreaElement>('[data-testid="prompt-input"]')?.focus());
      }),
    ];
    return () => offs.forEach((off) => off());
  }

  /**
   * run runs action name on text, or on the clipboard's text when text is
   * not given; the answer streams in a new chat.
   */
  async run(name: string, text?: string): Promise<void> {
    if (this.running) return;
    this.running = name;
    this.error = null;
    ui.show('chat');
    try {
      const input = text ?? (await engine.clipboardText());
      if (input.trim() === '') throw new Error('The clipboard has no text: copy some text first, then choose the action again.');
      await chat.startNew(() => engine.runQuickAction(name, input));
    } catch (e) {
      const m = message(e);
      this.error = `${name}: ${m.charAt(0).toUpperCase()}${m.slice(1)}`;
    } finally {
      this.running = null;
    }
  }

  dismiss(): void {
    this.error = null;
  }

  // ---- the editor in Settings

  /** edit starts editing the actions in force. */
  edit(): void {
    this.draft = this.actions.map((a) => ({ ...a }));
    this.problems = [];
    this.badRows = [];
    this.justSaved = false;
  }

  add(): void {
    this.draft.push({ name: '', prompt: `${placeholder}` });
    this.justSaved = false;
  }

  remove(i: number): void {
    this.draft.splice(i, 1);
    this.justSaved = false;
  }

  reset(): void {
    this.draft = defaultActions.map((a) => ({ ...a }));
    this.justSaved = false;
  }

  edited(): void {
    this.justSaved = false;
  }

  /** save checks the rows and saves them as the settings' quick actions. */
  async save(): Promise<boolean> {
    this.justSaved = false;
    const found = checkActions(this.draft);
    if (found.length > 0) {
      this.problems = found.map((p) => p.msg);
      this.badRows = found.map((p) => p.index).filter((i) => i >= 0);
      return false;
    }
    this.saving = true;
    try {
      const actions = this.draft.map((a) => ({ name: a.name.trim(), prompt: a.prompt }));
      const saved = await settings.change((cur) => ({ ...cur, quickActions: actions }));
      this.draft = (saved.quickActions ?? []).map((a) => ({ ...a }));
      this.problems = [];
      this.badRows = [];
      this.justSaved = true;
      return true;
    } catch (e) {
      this.problems = messageLines(e);
      this.badRows = this.problems.flatMap((l) => {
        const m = /quickActions\[(\d+)\]/.exec(l);
        return m ? [Number(m[1])] : [];
      });
      return false;
    } finally {
      this.saving = false;
    }
  }
}

export const quickActions = new QuickActions();
