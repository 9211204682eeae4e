import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { deferred, estimate, model } from '../../test/fakeEngine';
import type { Estimate } from '../types';
import { Budget, contextSteps, estimateDelayMs, snap } from './budget.svelte';
import { engineStatus } from './engineStatus.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const ask = vi.mocked(engine.estimate);

let budget: Budget;

beforeEach(() => {
  vi.useFakeTimers();
  vi.clearAllMocks();
  engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
  budget = new Budget();
});

afterEach(() => {
  vi.useRealTimers();
});

describe('context steps', () => {
  it('are powers of two and the halves between, ending at the trained context', () => {
    expect(contextSteps(2048, 32768)).toEqual([2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768]);
    expect(contextSteps(2048, 40960).slice(-3)).toEqual([24576, 32768, 40960]);
  });

  it('snap to the nearest stop', () => {
    const steps = contextSteps(2048, 131072);
    expect(snap(2048, steps)).toBe(2048);
    expect(snap(5000, steps)).toBe(4096);
    expect(snap(5500, steps)).toBe(6144);
    expect(snap(131072, steps)).toBe(131072);
    expect(snap(1e9, steps)).toBe(131072);
  });
});

describe('budget store', () => {
  it('starts at the context and KV type in force', async () => {
    ask.mockResolvedValue(estimate());
    budget.follow(model({ ctx: 8192, kv: 'q8' }));
    expect(budget.ctx).toBe(8192);
    expect(budget.kv).toBe('q8');
    expect(budget.min).toBe(2048);
    expect(budget.max).toBe(32768);
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    expect(ask).toHaveBeenCalledWith(8192, 'q8');
  });

  it('asks once the slider rests, for the latest position', async () => {
    ask.mockResolvedValue(estimate());
    budget.setCtx(4096);
    await vi.advanceTimersByTimeAsync(estimateDelayMs / 2);
    budget.setCtx(8192);
    await vi.advanceTimersByTimeAsync(estimateDelayMs / 2);
    budget.setKv('f16');
    budget.setCtx(16384);
    expect(ask).not.toHaveBeenCalled();
    expect(budget.pending).toBe(true);
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    expect(ask).toHaveBeenCalledTimes(1);
    expect(ask).toHaveBeenCalledWith(16384, 'f16');
    expect(budget.estimate).toEqual(estimate());
    expect(budget.pending).toBe(false);
  });

  it('keeps the latest answer when an earlier one arrives last', async () => {
    const slow = deferred<Estimate>();
    const fast = deferred<Estimate>();
    ask.mockReturnValueOnce(slow.promise).mockReturnValueOnce(fast.promise);
    budget.setCtx(4096);
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    budget.setCtx(32768);
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    expect(ask).toHaveBeenCalledTimes(2);
    fast.resolve(estimate({ ctx: 32768, verdict: 'will-not-fit' }));
    await vi.advanceTimersByTimeAsync(0);
    slow.resolve(estimate({ ctx: 4096, verdict: 'fits' }));
    await vi.advanceTimersByTimeAsync(0);
    expect(budget.estimate?.ctx).toBe(32768);
    expect(budget.estimate?.verdict).toBe('will-not-fit');
  });

  it('ignores a late failure of an earlier question too', async () => {
    const slow = deferred<Estimate>();
    ask.mockReturnValueOnce(slow.promise).mockResolvedValueOnce(estimate({ ctx: 8192 }));
    budget.setCtx(4096);
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    budget.setCtx(8192);
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    slow.reject(new Error('estimate: stale'));
    await vi.advanceTimersByTimeAsync(0);
    expect(budget.error).toBeNull();
    expect(budget.estimate?.ctx).toBe(8192);
  });

  it('snaps the slider to a stop and steps between stops', () => {
    ask.mockResolvedValue(estimate());
    budget.setCtx(5000);
    expect(budget.ctx).toBe(4096);
    budget.step(1);
    expect(budget.ctx).toBe(6144);
    budget.step(-10);
    expect(budget.ctx).toBe(2048);
    budget.step(100);
    expect(budget.ctx).toBe(32768);
  });

  it('shows why ApplyContext refused', async () => {
    vi.mocked(engine.applyContext).mockRejectedValueOnce(new Error('Tiny will not fit: needs 9.1 of 8.0 GiB.\nUse a q4 KV cache.'));
    expect(await budget.apply()).toBe(false);
    expect(budget.applyError).toContain('will not fit');
    budget.setCtx(2048);
    expect(budget.applyError).toBeNull();
  });

  it('takes the status ApplyContext returns', async () => {
    const s = { state: 'ready', busy: false, running: 0, model: model({ ctx: 2048 }) };
    vi.mocked(engine.applyContext).mockResolvedValueOnce(s);
    budget.setCtx(2048);
    expect(await budget.apply()).toBe(true);
    expect(engine.applyContext).toHaveBeenCalledWith(2048, 'auto');
    expect(engineStatus.status.model?.ctx).toBe(2048);
  });
});
