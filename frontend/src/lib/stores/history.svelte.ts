// The History tab: kept conversations, full-text search (debounced),
// opening one into the chat, deleting and exporting.

import * as engine from '../engine';
import { message } from '../format';
import type { ConversationSummary } from '../types';
import { chat } from './chat.svelte';

/** How long typing must pause before the search runs. */
export const searchDelayMs = 250;

export class History {
  query = $state('');
  items = $state<ConversationSummary[]>([]);
  /** The list was read at least once. */
  loaded = $state(false);
  error = $state<string | null>(null);
  /** What the last action (open, delete, export, copy) did or why it failed. */
  notice = $state<{ text: string; error: boolean } | null>(null);
  #timer: ReturnType<typeof setTimeout> | undefined;
  #seq = 0;

  connect(): () => void {
    return engine.on('history:changed', () => void this.refresh());
  }

  /** search runs the query once typing pauses. */
  search(query: string): void {
    this.query = query;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.refresh(), searchDelayMs);
  }

  /** refresh reads the list for the current query; the latest answer wins. */
  async refresh(): Promise<void> {
    clearTimeout(this.#timer);
    const seq = ++this.#seq;
    const q = this.query.trim();
    try {
      const items = await engine.conversations(q);
      if (seq !== this.#seq) return;
      this.items = items;
      this.error = null;
    } catch (e) {
      if (seq !== this.#seq) return;
      this.error = message(e);
    }
    this.loaded = true;
  }

  /** open restores a conversation into the chat; true when it did. */
  async open(id: number): Promise<boolean> {
    try {
      chat.restore(await engine.openConversation(id));
      this.notice = null;
      return true;
    } catch (e) {
      this.notice = { text: `Open: ${message(e)}`, error: true };
      return false;
    }
  }

  async remove(id: number): Promise<void> {
    try {
      await engine.deleteConversation(id);
      this.items = this.items.filter((c) => c.id !== id);
      chat.forget(id);
      this.notice = { text: 'Conversation deleted.', error: false };
    } catch (e) {
      this.notice = { text: `Delete: ${message(e)}`, error: true };
    }
  }

  /** save writes the conversation as Markdown where the save dialog says. */
  async save(id: number): Promise<void> {
    try {
      const path = await engine.saveConversation(id);
      this.notice = path ? { text: `Saved to ${path}`, error: false } : null;
    } catch (e) {
      this.notice = { text: `Export: ${message(e)}`, error: true };
    }
  }

  /** copy puts the conversation's Markdown on the clipboard. */
  async copy(id: number, write: (text: string) => Promise<void>): Promise<void> {
    try {
      await write(await engine.exportConversation(id));
      this.notice = { text: 'Markdown copied.', error: false };
    } catch (e) {
      this.notice = { text: `Copy: ${message(e)}`, error: true };
    }
  }
}

export const history = new History();
