// The one name of a loaded model's KV cache mode, for every place that
// shows it (the header, the context panel's line in force).

import type { Model } from './types';

/** kvName is the cache as the engine names it ("q4 KV (rotated)"), else "<type> KV". */
export function kvName(m: Pick<Model, 'kv' | 'kvLabel'>): string {
  return m.kvLabel || `${m.kv} KV`;
}
