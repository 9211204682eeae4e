// The context slider's stops: powers of two and the halves between them,
// the lengths people choose, and the model's trained context at the end.

/** The slider's lowest context. */
export const minContext = 2048;

/**
 * contextSteps are the slider's stops from lo to hi: powers of two and
 * the halves between them (2K, 3K, 4K, 6K, 8K, …), and hi itself.
 */
export function contextSteps(lo: number, hi: number): number[] {
  const steps = new Set<number>([lo]);
  for (let p = 1024; p <= hi; p *= 2) {
    for (const v of [p, p + p / 2]) if (v > lo && v < hi) steps.add(v);
  }
  steps.add(hi);
  return [...steps].sort((a, b) => a - b);
}

/** snap is the stop nearest v, measured in log space. */
export function snap(v: number, steps: number[]): number {
  let best = steps[0] ?? v;
  for (const s of steps) if (Math.abs(Math.log(s / v)) < Math.abs(Math.log(best / v))) best = s;
  return best;
}
