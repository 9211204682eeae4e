// The catalog of downloadable models, each file's estimate on this
// machine (listed size, or exact once its header was read), and the
// downloads with their progress (download:progress events).

import * as engine from '../engine';
import { message } from '../format';
import type { CatalogEntry, Download, Estimate } from '../types';

/** key names one file of the catalog, as Download.key does. */
export const fileKey = (id: string, quant: string): string => `${id}/${quant}`;

/** Exact is the header-read estimate of one catalog file. */
export interface Exact {
  busy: boolean;
  estimate?: Estimate;
  error?: string;
}

/** running: a download in one of these states can be cancelled. */
export const running = (d: Download | undefined): boolean =>
  d !== undefined && (d.state === 'starting' || d.state === 'downloading' || d.state === 'verifying');

export class Catalog {
  entries = $state<CatalogEntry[]>([]);
  loaded = $state(false);
  /** Why the catalog could not be read, else null. */
  error = $state<string | null>(null);
  /** The downloads of this run by key, kept current by download:progress. */
  downloads = $state<Record<string, Download>>({});
  /** Why Download or CancelDownload failed to start, by key. */
  startErrors = $state<Record<string, string>>({});
  exact = $state<Record<string, Exact>>({});

  connect(): () => void {
    const off = engine.on('download:progress', (d) => this.#progress(d));
    void this.refresh();
    engine.downloads().then(
      (list) => {
        for (const d of list) if (!this.downloads[d.key]) this.downloads[d.key] = d;
      },
      () => {},
    );
    return off;
  }

  async refresh(): Promise<void> {
    try {
      this.entries = await engine.catalog();
      this.error = null;
      for (const e of this.entries) {
        for (const f of e.files ?? []) {
          const k = fileKey(e.id, f.quant);
          if (f.download && !this.downloads[k]) this.downloads[k] = f.download;
        }
      }
    } catch (e) {
      this.error = message(e);
    } finally {
      this.loaded = true;
    }
  }

  #progress(d: Download): void {
    const before = this.downloads[d.key];
    this.downloads[d.key] = d;
    // A finished download has a local path now (and a failed one may
    // have dropped its partial file): the catalog says which.
    if (before?.state !== d.state && (d.state === 'done' || d.state === 'failed' || d.state === 'cancelled')) {
      void this.refresh();
    }
  }

  async download(id: string, quant: string): Promise<void> {
    const k = fileKey(id, quant);
    this.startErrors[k] = '';
    try {
      const d = await engine.download(id, quant);
      // Progress events can be ahead of the answer: keep the newer state.
      const now = this.downloads[k];
      if (!now || !running(now) || now.done <= d.done) this.downloads[k] = d;
    } catch (e) {
      this.startErrors[k] = message(e);
    }
  }

  async cancel(id: string, quant: string): Promise<void> {
    const k = fileKey(id, quant);
    try {
      await engine.cancelDownload(id, quant);
    } catch (e) {
      this.startErrors[k] = message(e);
    }
  }

  async readExact(id: string, quant: string): Promise<void> {
    const k = fileKey(id, quant);
    this.exact[k] = { ...this.exact[k], busy: true, error: undefined };
    try {
      this.exact[k] = { busy: false, estimate: await engine.catalogEstimate(id, quant) };
    } catch (e) {
      this.exact[k] = { busy: false, error: message(e) };
    }
  }
}

export const catalog = new Catalog();
