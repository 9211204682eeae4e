// The layout of the context panel's stacked bar: each part of the
// estimate as a share of the bar, and where the budget falls on it.

import type { Estimate } from './types';

export interface BarLayout {
  /** Widths in percent of the bar. */
  weights: number;
  kv: number;
  scratch: number;
  overhead: number;
  /** The budget marker's position in percent; null when the budget is unknown. */
  budget: number | null;
}

/**
 * barLayout scales the bar to the larger of the total and the budget, with
 * a little room past it, so both the parts and the marker show.
 */
export function barLayout(e: Pick<Estimate, 'weights' | 'kvBytes' | 'scratch' | 'overhead' | 'total' | 'budget'>): BarLayout {
  const parts = [e.weights, e.kvBytes, e.scratch, e.overhead].map((v) => Math.max(0, v || 0));
  const sum = parts.reduce((a, b) => a + b, 0);
  const scale = Math.max(sum, e.total || 0, e.budget || 0) * 1.08;
  const pct = (v: number): number => (scale > 0 ? (v * 100) / scale : 0);
  const [weights = 0, kv = 0, scratch = 0, overhead = 0] = parts.map(pct);
  return { weights, kv, scratch, overhead, budget: e.budget > 0 ? pct(e.budget) : null };
}
