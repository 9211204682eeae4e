// The engine's state and loaded model, kept current from model:* events.

import * as engine from '../engine';
import type { Prepare, Status } from '../types';

export class EngineStatus {
  status = $state<Status>({ state: 'starting', busy: false, running: 0 });
  /** Why the engine cannot be reached at all (outside the app), else null. */
  unreachable = $state<string | null>(null);

  get ready(): boolean {
    return this.status.state === 'ready' && (this.status.model !== undefined || this.status.remote !== undefined);
  }

  get prepare(): Prepare | undefined {
    return this.status.prepare;
  }

  /** set takes a Status a bound method returned (LoadModel, ApplyContext). */
  set(s: Status): void {
    if (s?.state) this.take(s);
  }

  /**
   * take keeps s unless a later status already arrived: events and call
   * results can reach the window out of order, and Status.seq says which
   * the engine read last.
   */
  private take(s: Status): void {
    if (s.seq !== undefined && this.status.seq !== undefined && s.seq < this.status.seq) return;
    this.status = s;
  }

  /** connect subscribes first, then asks, so no change falls in between. */
  connect(): () => void {
    const offStatus = engine.on('model:status', (s) => {
      this.take(s);
    });
    const offProgress = engine.on('model:progress', (p) => {
      this.status = { ...this.status, prepare: p };
    });
    engine.status().then(
      (s) => {
        this.take(s);
      },
      (e: unknown) => {
        this.unreachable = e instanceof Error ? e.message : String(e);
      },
    );
    return () => {
      offStatus();
      offProgress();
    };
  }
}

export const engineStatus = new EngineStatus();
