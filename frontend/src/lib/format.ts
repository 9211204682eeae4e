// Small formatters for sizes, rates, durations and context lengths.

export function bytes(n: number): string {
  if (!Number.isFinite(n)) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${n < 0 ? '-' : ''}${v.toFixed(i === 0 ? 0 : 1)} ${units[i] ?? ''}`;
}

/** gib is n bytes in GiB with two decimals, the unit left to the caller. */
export function gib(n: number): string {
  return (n / 2 ** 30).toFixed(2);
}

export function ms(n: number): string {
  return n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${Math.round(n)} ms`;
}

/**
 * thoughtFor says how long a reasoning model thought, as the Thinking
 * section's title: "Thought for 3 s", "Thought for 0.4 s", "Thought for
 * 1 min 5 s"; "Thoughts" when the time is not known.
 */
export function thoughtFor(thinkingMs: number | undefined): string {
  if (!thinkingMs || thinkingMs <= 0) return 'Thoughts';
  const s = thinkingMs / 1000;
  if (s < 1) return `Thought for ${Math.max(0.1, Math.round(s * 10) / 10)} s`;
  const whole = Math.round(s);
  if (whole < 60) return `Thought for ${whole} s`;
  const rest = whole % 60;
  return `Thought for ${Math.floor(whole / 60)} min${rest ? ` ${rest} s` : ''}`;
}

export function rate(tokPerSec: number): string {
  return `${tokPerSec.toFixed(1)} tok/s`;
}

/**
 * expectedRate is an expected decode speed, as rounded as an estimate is
 * ("~42 tok/s", "~3.5 tok/s"); "" when there is none.
 */
export function expectedRate(tokPerSec: number): string {
  if (!Number.isFinite(tokPerSec) || tokPerSec <= 0) return '';
  const n = tokPerSec >= 10 ? Math.round(tokPerSec).toString() : tokPerSec.toFixed(1);
  return `~${n} tok/s`;
}

/** speed is a transfer rate in bytes per second. */
export function speed(bytesPerSec: number): string {
  return `${bytes(bytesPerSec)}/s`;
}

/** eta is a time left in seconds, as "12 s", "3 min 5 s" or "1 h 4 min". */
export function eta(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return '—';
  const s = Math.round(sec);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/**
 * tokens is a context length the way model cards write it (4K, 1.5K,
 * 128K, 1M) when that is exact, else the plain number.
 */
export function tokens(n: number): string {
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n / (1 << 20)}M`;
  if (n >= 1024 && n % 512 === 0) return `${n / 1024}K`;
  return String(n);
}

/** upTo is the largest context that fits, "up to 8K", with "(full)" when it
 * is the model's whole trained context (the service caps it there). */
export function upTo(maxCtx: number, ctxTrain: number): string {
  return `up to ${tokens(maxCtx)}${ctxTrain > 0 && maxCtx >= ctxTrain ? ' (full)' : ''}`;
}

/** exact is a token count with thousands separators: 131,072. */
export function exact(n: number): string {
  return n.toLocaleString('en-US');
}

/** date is an RFC 3339 time as a short local date, today's as a time. */
export function date(rfc3339: string, now = new Date()): string {
  const d = new Date(rfc3339);
  if (Number.isNaN(d.getTime())) return rfc3339;
  if (d.toDateString() === now.toDateString()) {
    return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  }
  const sameYear = d.getFullYear() === now.getFullYear();
  return d.toLocaleDateString(undefined, sameYear ? { month: 'short', day: 'numeric' } : { year: 'numeric', month: 'short', day: 'numeric' });
}

/** message is what went wrong, from anything thrown. */
export function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** messageLines is an error's message a line each (the Go side's checks list one bad field a line), blank lines left out. */
export function messageLines(e: unknown): string[] {
  return message(e)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/**
 * residentRead is what a model keeps in memory beside what one token reads,
 * "17.3 GiB resident · 1.9 GiB read per token": a mixture of experts keeps
 * every expert resident but reads only those a token is routed to. "" when
 * a token reads (nearly) all the weights (active is then 0).
 */
export function residentRead(e: { weights: number; active: number; activeApprox?: boolean }): string {
  if (!(e.active > 0) || !(e.weights > 0)) return '';
  return `${bytes(e.weights)} resident · ${e.activeApprox ? '≈ ' : ''}${bytes(e.active)} read per token`;
}

/** expertsPerToken is "8 of 128 experts per token"; "" for a dense model. */
export function expertsPerToken(e: { experts: number; expertsUsed: number }): string {
  if (!(e.experts > 0)) return '';
  return `${e.expertsUsed} of ${e.experts} experts per token`;
}
