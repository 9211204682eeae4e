// The local GGUF files of the Models tab: the list, adding files (open
// dialog, dropped on the window), loading one, and why a load was refused.

import * as engine from '../engine';
import { message } from '../format';
import type { LocalModel } from '../types';
import { engineStatus } from './engineStatus.svelte';

export class Models {
  list = $state<LocalModel[]>([]);
  /** Why the list could not be read, else null. */
  listError = $state<string | null>(null);
  /** The path being loaded, else null. */
  loading = $state<string | null>(null);
  /** Why the last load was refused: one line, then the advice lines. */
  loadError = $state<string | null>(null);
  /** Why the last file could not be added (open dialog, drop), else null. */
  addError = $state<string | null>(null);
  /** The file added last, to point at it in the list. */
  added = $state<string | null>(null);

  get loaded(): LocalModel | undefined {
    return this.list.find((m) => m.loaded);
  }

  connect(): () => void {
    const off = engine.on('models:changed', (l) => {
      this.list = unique(l ?? []);
      this.listError = null;
    });
    void this.refresh();
    return off;
  }

  async refresh(): Promise<void> {
    try {
      this.list = unique(await engine.models());
      this.listError = null;
    } catch (e) {
      this.listError = message(e);
    }
  }

  async load(path: string): Promise<boolean> {
    this.loading = path;
    this.loadError = null;
    try {
      engineStatus.set(await engine.loadModel(path));
      return true;
    } catch (e) {
      this.loadError = message(e);
      return false;
    } finally {
      this.loading = null;
      // The Go side says which is loaded through models:changed; asking
      // again covers a refusal, after which nothing changed there.
      void this.refresh();
    }
  }

  /** add adds a GGUF file from elsewhere; null and addError when refused. */
  async add(path: string): Promise<LocalModel | null> {
    this.addError = null;
    try {
      const m = await engine.addModel(path);
      this.added = m.path;
      if (!this.list.some((x) => x.path === m.path)) this.list = [...this.list, m];
      return m;
    } catch (e) {
      // Name the file, unless the error does already.
      const why = message(e);
      this.addError = why.includes(basename(path)) ? why : `${basename(path)}: ${why}`;
      return null;
    }
  }

  /** choose shows the open dialog; the Go side adds the file chosen. */
  async choose(): Promise<void> {
    this.addError = null;
    try {
      const path = await engine.chooseModelFile();
      if (path === '') return; // cancelled
      this.added = path;
      await this.refresh();
    } catch (e) {
      this.addError = message(e);
    }
  }

  async forget(path: string): Promise<void> {
    try {
      await engine.forgetModel(path);
      this.list = this.list.filter((m) => m.path !== path);
    } catch (e) {
      this.addError = message(e);
    }
  }
}

/** unique keeps the first row of each path (the list is keyed by path). */
function unique(list: LocalModel[]): LocalModel[] {
  return list.filter((m, i) => list.findIndex((x) => x.path === m.path) === i);
}

export function basename(path: string): string {
  return path.split(/[\\/]/).pop() ?? path;
}

export const models = new Models();
