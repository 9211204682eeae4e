// The documents attached to the conversation: the chips above the prompt
// box. The Go side reads each one in the background (document:changed
// events) and says whether it fits whole; the chat sends the ready ones'
// ids with every question.
//
// The app's file drop gives paths; a page in a browser gives File
// objects, whose bytes go to the Go side as base64. A file that fails
// (too large, unsupported, encrypted) stays as a red chip with the reason
// and takes nothing else with it.

import * as engine from '../engine';
import { message } from '../format';
import type { DocumentInfo } from '../types';
import type { DroppedDocument } from './drops.svelte';
import { defaultDocumentBytes, settings } from './settings.svelte';

/** A chip whose document never reached the Go side has an id starting with this. */
const localPrefix = 'local-';
/** Where the size limit is set; every refusal for size names it (the Go side's words too). */
export const limitHint = '(Settings › Largest document)';

export class Documents {
  items = $state<DocumentInfo[]>([]);
  #local = 0;
  // Bumped by clear, so an attach that returns afterwards is dropped.
  #session = 0;

  connect(): () => void {
    return engine.on('document:changed', (d) => this.#update(d));
  }

  /** ids are the documents a question is asked about: every one not failed. */
  get ids(): string[] {
    return this.items.filter((d) => d.state !== 'error').map((d) => d.id);
  }

  /** The largest file accepted (the settings' documentMaxBytes). */
  get maxBytes(): number {
    return settings.saved?.documentMaxBytes || defaultDocumentBytes;
  }

  get reading(): boolean {
    return this.items.some((d) => d.state === 'reading');
  }

  /** add attaches dropped documents: by path in the app, by bytes in a browser. */
  async add(docs: DroppedDocument[]): Promise<void> {
    await Promise.all(docs.map((d) => (d.path ? this.#attach(d.name, () => engine.attachDocumentFile(d.path ?? '')) : this.#addFile(d.name, d.file))));
  }

  async #addFile(name: string, file: File | undefined): Promise<void> {
    if (!file) {
      this.#failed(name, 'the dropped file could not be read');
      return;
    }
    if (file.size > this.maxBytes) {
      this.#failed(name, `${name}: the file is ${mib(file.size)}, over the ${mib(this.maxBytes)} limit for documents ${limitHint}`, file.size);
      return;
    }
    await this.#attach(name, async () => engine.attachDocumentData(name, await base64(file)));
  }

  async #attach(name: string, start: () => Promise<DocumentInfo>): Promise<void> {
    const session = this.#session;
    try {
      const d = await start();
      if (session !== this.#session) {
        engine.removeDocument(d.id).catch(() => {});
        return;
      }
      if (!this.items.some((x) => x.id === d.id)) this.items.push(d);
      // Its events may have come before this answer and been dropped:
      // ask where it is now (later events keep the chip current).
      await this.refresh();
    } catch (e) {
      if (session === this.#session) this.#failed(name, message(e));
    }
  }

  #failed(name: string, error: string, size = 0): void {
    this.items.push({
      id: `${localPrefix}${++this.#local}`,
      name,
      kind: '',
      size,
      state: 'error',
      progress: 0,
      error,
      pages: 0,
      lines: 0,
      tokens: 0,
      whole: false,
    });
  }

  #update(d: DocumentInfo): void {
    const i = this.items.findIndex((x) => x.id === d.id);
    if (i < 0) return; // removed, or another conversation's
    // Fit is computed by refresh, with the other documents.
    const fit = this.items[i]?.fit;
    this.items[i] = { ...d, fit: d.fit || fit };
    if (d.state === 'ready') void this.refresh();
  }

  /** refresh asks again how the documents fit (a document was read or removed, the model or context changed). */
  async refresh(): Promise<void> {
    const ids = this.items.filter((d) => !d.id.startsWith(localPrefix)).map((d) => d.id);
    if (ids.length === 0) return;
    const session = this.#session;
    try {
      const list = await engine.documents(ids);
      if (session !== this.#session) return;
      for (const d of list) {
        const i = this.items.findIndex((x) => x.id === d.id);
        if (i >= 0) this.items[i] = d;
      }
    } catch {
      // A document the Go side no longer has (the app restarted): keep the
      // chip; asking with it says to attach it again.
    }
  }

  async remove(id: string): Promise<void> {
    this.items = this.items.filter((d) => d.id !== id);
    if (!id.startsWith(localPrefix)) {
      await engine.removeDocument(id).catch(() => {});
      await this.refresh();
    }
  }

  /**
   * restore shows the documents a reopened conversation kept (the Go side
   * attached them again), and a red chip for each one it cites that was
   * not kept, so a follow-up is not silently asked without it.
   */
  restore(kept: DocumentInfo[], notKept: string[]): void {
    this.items = kept.map((d) => ({ ...d }));
    for (const name of notKept) this.#failed(name, `${name} was not kept with this conversation (it was saved by an older version): drop the file again to ask about it`);
    void this.refresh();
  }

  /** clear detaches every document (a new or restored conversation). */
  clear(): void {
    this.#session++;
    for (const d of this.items) if (!d.id.startsWith(localPrefix)) engine.removeDocument(d.id).catch(() => {});
    this.items = [];
  }
}

/** mib writes a byte count as "3.2 MiB" (or KiB below one MiB). */
export function mib(bytes: number): string {
  if (bytes < 2 ** 20) return `${Math.max(1, Math.round(bytes / 1024))} KiB`;
  return `${String(Math.round((bytes / 2 ** 20) * 10) / 10)} MiB`;
}

/** base64 is a file's bytes as base64, built in pieces (large files overflow a single String.fromCharCode). */
export async function base64(file: Blob): Promise<string> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const parts: string[] = [];
  const step = 0x8000;
  for (let i = 0; i < bytes.length; i += step) parts.push(String.fromCharCode(...bytes.subarray(i, i + step)));
  return btoa(parts.join(''));
}

export const documents = new Documents();
