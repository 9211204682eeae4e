// The Diagnostics tab: the machine, the memory budget, the backend, the
// versions and the loaded model, as the Go side reports them.

import * as engine from '../engine';
import { message } from '../format';
import type { Diagnostics as DiagnosticsData } from '../types';

export class Diagnostics {
  data = $state<DiagnosticsData | null>(null);
  error = $state<string | null>(null);
  busy = $state(false);

  async load(): Promise<void> {
    this.busy = true;
    try {
      this.data = await engine.diagnostics();
      this.error = null;
    } catch (e) {
      this.error = message(e);
    } finally {
      this.busy = false;
    }
  }
}

export const diagnostics = new Diagnostics();
