// The context budget of the loaded model: the slider's context and KV
// type, the estimate for them (debounced, the latest answer wins) and
// applying them.

import * as engine from '../engine';
import { message } from '../format';
import type { Estimate, KVType, Model } from '../types';
import { kvTypes } from '../types';
import { engineStatus } from './engineStatus.svelte';
import { contextSteps, minContext, snap } from '../contextSteps';

export { contextSteps, minContext, snap };

/** How long the slider must rest before the estimate is asked for. */
export const estimateDelayMs = 100;

export class Budget {
  ctx = $state(4096);
  kv = $state<KVType>('auto');
  estimate = $state<Estimate | null>(null);
  /** Why the estimate could not be made (e.g. no model), else null. */
  error = $state<string | null>(null);
  /** An estimate is asked for and not answered yet. */
  pending = $state(false);
  applying = $state(false);
  /** Why ApplyContext refused, else null. */
  applyError = $state<string | null>(null);
  /** The model whose context the slider shows (path and ctx in force). */
  #model = '';
  #timer: ReturnType<typeof setTimeout> | undefined;
  #seq = 0;

  /** trained is the slider's end: the model's trained context. */
  get trained(): number {
    return this.estimate?.ctxTrain || engineStatus.status.model?.ctxTrain || 0;
  }

  get min(): number {
    return Math.min(minContext, this.trained || minContext);
  }

  get max(): number {
    return Math.max(this.trained, this.min);
  }

  get steps(): number[] {
    return contextSteps(this.min, this.max);
  }

  /**
   * follow points the panel at the loaded model: when it changes (another
   * model, or a context applied), the slider starts at what is in force.
   */
  follow(m: Model | undefined): void {
    const key = m ? `${m.path}|${m.ctx}|${m.kv}` : '';
    if (key === this.#model) return;
    this.#model = key;
    this.estimate = null;
    this.error = null;
    this.applyError = null;
    if (!m) {
      clearTimeout(this.#timer);
      this.#seq++; // an answer on its way is for the old model
      this.pending = false;
      return;
    }
    this.ctx = m.ctx;
    this.kv = (kvTypes as readonly string[]).includes(m.kv) ? (m.kv as KVType) : 'auto';
    this.request();
  }

  /** setCtx moves the slider to the stop nearest v. */
  setCtx(v: number): void {
    if (!Number.isFinite(v)) return;
    const steps = this.steps;
    this.ctx = steps.length > 1 ? snap(v, steps) : v;
    this.applyError = null;
    this.request();
  }

  /** step moves the slider by n stops (the − and + buttons, arrow keys). */
  step(n: number): void {
    const steps = this.steps;
    const i = steps.indexOf(snap(this.ctx, steps));
    const next = steps[Math.max(0, Math.min(steps.length - 1, i + n))];
    if (next !== undefined) this.setCtx(next);
  }

  /**
   * offer puts a figure the panel offers on the slider as it is (not
   * snapped to a stop): a KV type's largest context, which Apply accepts.
   */
  offer(kv: KVType, ctx: number): void {
    if (!Number.isInteger(ctx) || ctx <= 0) return;
    this.kv = kv;
    this.ctx = ctx;
    this.applyError = null;
    this.request();
  }

  /** blocked: the estimate for the slider says it will not fit, so Apply is off. */
  get blocked(): boolean {
    return this.estimate?.verdict === 'will-not-fit';
  }

  setKv(kv: KVType): void {
    this.kv = kv;
    this.applyError = null;
    this.request();
  }

  /** request asks for the estimate once the slider rests. */
  request(): void {
    clearTimeout(this.#timer);
    this.pending = true;
    this.#timer = setTimeout(() => void this.#ask(), estimateDelayMs);
  }

  async #ask(): Promise<void> {
    const seq = ++this.#seq;
    const { ctx, kv } = this;
    try {
      const e = await engine.estimate(ctx, kv);
      if (seq !== this.#seq) return; // a later question was asked
      this.estimate = e;
      this.error = null;
    } catch (e) {
      if (seq !== this.#seq) return;
      this.error = message(e);
    }
    this.pending = false;
  }

  async apply(): Promise<boolean> {
    if (this.blocked) return false; // the button is off too; the service would refuse it
    this.applying = true;
    this.applyError = null;
    try {
      engineStatus.set(await engine.applyContext(this.ctx, this.kv));
      return true;
    } catch (e) {
      this.applyError = message(e);
      return false;
    } finally {
      this.applying = false;
    }
  }

  /** stop forgets a question not asked yet (the panel closed). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#seq++;
    this.pending = false;
  }
}

export const budget = new Budget();
