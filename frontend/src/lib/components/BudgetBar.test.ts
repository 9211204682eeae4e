import { fireEvent, render, screen } from '@testing-library/svelte';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { barLayout } from '../budgetBar';
import { budget, estimateDelayMs } from '../stores/budget.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import { estimate, model } from '../../test/fakeEngine';
import BudgetBar from './BudgetBar.svelte';
import ContextPanel from './ContextPanel.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const GiB = 2 ** 30;
const width = (id: string): number => parseFloat(screen.getByTestId(id).style.width);

describe('budget bar', () => {
  it('sizes each part against the larger of total and budget, with the budget marked', () => {
    // 4 + 1 + 0.5 + 0.5 = 6 GiB of an 8 GiB budget: the bar spans 8 × 1.08.
    render(BudgetBar, { estimate: estimate() });
    const scale = 8 * 1.08;
    expect(width('bar-weights')).toBeCloseTo((4 / scale) * 100, 3);
    expect(width('bar-kv')).toBeCloseTo((1 / scale) * 100, 3);
    expect(width('bar-scratch')).toBeCloseTo((0.5 / scale) * 100, 3);
    expect(width('bar-overhead')).toBeCloseTo((0.5 / scale) * 100, 3);
    expect(parseFloat(screen.getByTestId('bar-budget').style.left)).toBeCloseTo((8 / scale) * 100, 3);
    expect(screen.getByTestId('budget-bar').dataset.verdict).toBe('fits');
  });

  it('runs past the marker when it will not fit', () => {
    const e = estimate({ kvBytes: 10 * GiB, total: 15 * GiB, verdict: 'will-not-fit' });
    render(BudgetBar, { estimate: e });
    const l = barLayout(e);
    expect(l.weights + l.kv + l.scratch + l.overhead).toBeGreaterThan(l.budget ?? 100);
    expect(width('bar-kv')).toBeCloseTo((10 / (15 * 1.08)) * 100, 3);
    expect(screen.getByTestId('budget-bar').dataset.verdict).toBe('will-not-fit');
  });

  it('has no marker when the budget is unknown', () => {
    render(BudgetBar, { estimate: estimate({ budget: 0, verdict: 'unknown' }) });
    expect(screen.queryByTestId('bar-budget')).toBeNull();
    expect(width('bar-weights')).toBeCloseTo((4 / (6 * 1.08)) * 100, 3);
  });
});

describe('context panel', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.clearAllMocks();
    budget.follow(undefined);
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ ctx: 4096, ctxTrain: 32768 }) };
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('shows the verdict, the limits per KV type and a warning with advice when it will not fit', async () => {
    vi.mocked(engine.estimate).mockImplementation(async (ctx) =>
      ctx > 8192
        ? estimate({ ctx, kvBytes: 8 * GiB, total: 13 * GiB, verdict: 'will-not-fit', advice: ['Use a q4 KV cache.', 'Choose 8K or less.'] })
        : estimate({ ctx }),
    );
    render(ContextPanel);
    const slider = screen.getByTestId('ctx-slider') as HTMLInputElement;
    expect(slider.min).toBe('2048');
    expect(slider.max).toBe('32768');
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    expect(screen.getByTestId('verdict').dataset.verdict).toBe('fits');
    expect(screen.queryByTestId('ctx-warning')).toBeNull();
    expect(screen.getByTestId('kv-limit-q8').textContent).toContain('up to 8,192');

    await fireEvent.input(slider, { target: { value: '32768' } });
    expect(screen.getByTestId('ctx-value').textContent).toContain('32,768');
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    expect(engine.estimate).toHaveBeenLastCalledWith(32768, 'q4');
    expect(screen.getByTestId('verdict').dataset.verdict).toBe('will-not-fit');
    expect(screen.getByTestId('ctx-warning').textContent).toMatch(/will not fit/i);
    expect(screen.getAllByTestId('advice-item').map((e) => e.textContent)).toEqual(['Use a q4 KV cache.', 'Choose 8K or less.']);
  });

  it('says when the full trained context fits', async () => {
    vi.mocked(engine.estimate).mockImplementation(async (ctx) =>
      estimate({ ctx, maxCtx: 32768, limits: [{ kv: 'q4', maxCtx: 32768, bytes: GiB }, { kv: 'f16', maxCtx: 16384, bytes: 4 * GiB }] }),
    );
    render(ContextPanel);
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    expect(screen.getByTestId('kv-limit-q4').textContent).toMatch(/up to 32,768 \(full\)/);
    expect(screen.getByTestId('kv-limit-f16').textContent).not.toContain('full');
  });

  it('shows why Apply was refused', async () => {
    vi.mocked(engine.estimate).mockResolvedValue(estimate());
    vi.mocked(engine.applyContext).mockRejectedValue(new Error('Tiny will not fit: needs 13.0 of 8.0 GiB.'));
    render(ContextPanel);
    await fireEvent.input(screen.getByTestId('ctx-slider'), { target: { value: '16384' } });
    await fireEvent.click(screen.getByTestId('apply-context'));
    await vi.waitFor(() => expect(screen.getByTestId('context-error').textContent).toContain('will not fit'));
    expect(engine.applyContext).toHaveBeenCalledWith(16384, 'q4');
  });
});
