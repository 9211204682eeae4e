// Files dragged onto the window. A .gguf file is added to the models (and
// the Models tab shows it); every other file is handed to the documents
// handler (the documents store, which attaches them to the chat).
//
// The app gives paths (the Wails runtime's file drop); a browser, where
// the end-to-end tests run the page, gives File objects without paths,
// and a model can only be added by path, so the drop is explained instead.

import { models } from './models.svelte';
import { ui } from './ui.svelte';

/** A dropped file that is not a model: its path in the app, its File in a browser. */
export interface DroppedDocument {
  name: string;
  path?: string;
  file?: File;
}

export type DocumentHandler = (docs: DroppedDocument[]) => void;

/** How long a drop waits for the app's paths before it counts as a browser drop. */
export const pathWaitMs = 400;

export const isModelFile = (name: string): boolean => name.toLowerCase().endsWith('.gguf');

export class Drops {
  /** A file is being dragged over the window. */
  dragging = $state(false);
  /** What the last drop did, or why it could not. */
  notice = $state<string | null>(null);
  #documents: DocumentHandler | null = null;
  #depth = 0;
  #waiting: ReturnType<typeof setTimeout> | undefined;
  // When the app last gave paths: its native drop can come before the DOM's.
  #pathsAt = -Infinity;

  /** onDocuments registers the handler of dropped documents; it returns the unregisterer. */
  onDocuments(handler: DocumentHandler): () => void {
    this.#documents = handler;
    return () => {
      if (this.#documents === handler) this.#documents = null;
    };
  }

  /** dragEnter, dragLeave and dragEnd follow the DOM's drag events. */
  dragEnter(types: readonly string[]): void {
    if (!types.includes('Files')) return;
    this.#depth++;
    this.dragging = true;
  }

  dragLeave(): void {
    this.#depth = Math.max(0, this.#depth - 1);
    if (this.#depth === 0) this.dragging = false;
  }

  dragEnd(): void {
    this.#depth = 0;
    this.dragging = false;
  }

  /** paths takes the paths the app's file drop gives. */
  async paths(paths: string[]): Promise<void> {
    clearTimeout(this.#waiting);
    this.#waiting = undefined;
    this.#pathsAt = Date.now();
    this.dragEnd();
    const ggufs = paths.filter(isModelFile);
    const docs = paths.filter((p) => !isModelFile(p)).map((p) => ({ name: p.split(/[\\/]/).pop() ?? p, path: p }));
    if (docs.length > 0) this.#documents?.(docs);
    if (ggufs.length === 0) return;
    ui.show('models');
    const added: string[] = [];
    for (const p of ggufs) {
      const m = await models.add(p);
      if (m) added.push(m.name || p);
    }
    this.notice = added.length > 0 ? `Added ${added.join(', ')}.` : null;
  }

  /**
   * files takes a DOM drop. In the app the paths follow through paths();
   * if none come, this is a browser, which cannot add a model by path.
   */
  files(files: File[]): void {
    this.dragEnd();
    const ggufs = files.filter((f) => isModelFile(f.name));
    const docs = files.filter((f) => !isModelFile(f.name));
    if (ggufs.length === 0 && docs.length === 0) return;
    if (Date.now() - this.#pathsAt < pathWaitMs) return; // the app's paths came first
    clearTimeout(this.#waiting);
    this.#waiting = setTimeout(() => {
      this.#waiting = undefined;
      if (docs.length > 0) this.#documents?.(docs.map((f) => ({ name: f.name, file: f })));
      if (ggufs.length > 0) {
        ui.show('models');
        this.notice = `${ggufs.map((f) => f.name).join(', ')}: this page cannot see where a dropped file is. Use "Open GGUF file…" instead.`;
      }
    }, pathWaitMs);
  }
}

export const drops = new Drops();
