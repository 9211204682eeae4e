// Words for the KV quality check the engine runs on a model loaded with
// KV "auto" (service.KVCheck).

import type { KVCheck } from './types';

/** percent is the check's progress, 0..100. */
export function kvCheckPercent(k: KVCheck): number {
  return k.total > 0 ? Math.floor((k.done * 100) / k.total) : 0;
}

/** kvCheckLine is the one line that says where the check is. */
export function kvCheckLine(k: KVCheck): string {
  switch (k.state) {
    case 'running':
      return `Checking KV quality… ${kvCheckPercent(k)}%`;
    case 'failed':
      return `KV check failed: ${k.error ?? 'unknown error'}`;
    default:
      return `KV check: ${k.chosen ?? '?'}${k.cached ? ' (checked earlier)' : ''}`;
  }
}

/** pct formats an agreement 0..1 as "96.0%". */
export function pct(x: number): string {
  return `${(100 * x).toFixed(1)}%`;
}
