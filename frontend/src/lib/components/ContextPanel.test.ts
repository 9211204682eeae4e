import { fireEvent, render, screen } from '@testing-library/svelte';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { estimate, model } from '../../test/fakeEngine';
import { budget, estimateDelayMs } from '../stores/budget.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import { kvName } from '../kvLabel';
import ContextPanel from './ContextPanel.svelte';
import Header from './Header.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const ask = vi.mocked(engine.estimate);
const apply = vi.mocked(engine.applyContext);

// The panel at 8K with f16 against a small budget: will not fit, and each
// type's largest context is in the limits row and the advice alike.
const tooLong = estimate({
  ctx: 8192,
  kv: 'f16',
  verdict: 'will-not-fit',
  maxCtx: 2622,
  ctxTrain: 8192,
  limits: [
    { kv: 'q4', maxCtx: 4720, bytes: 1 },
    { kv: 'q8', maxCtx: 2736, bytes: 2 },
    { kv: 'f16', maxCtx: 2622, bytes: 4 },
  ],
  advice: ['Use a smaller context: 2,622 tokens is the largest that fits with f16 KV', 'With q8 KV the largest context that fits is 2,736 tokens'],
});

beforeEach(() => {
  vi.useFakeTimers();
  vi.clearAllMocks();
  engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ ctx: 2048, kv: 'f16', kvLabel: 'f16 KV', ctxTrain: 8192 }) };
});

afterEach(() => {
  budget.stop();
  vi.useRealTimers();
});

async function showing(e: typeof tooLong): Promise<void> {
  ask.mockResolvedValue(e);
  render(ContextPanel);
  await vi.advanceTimersByTimeAsync(estimateDelayMs);
  budget.setCtx(e.ctx);
  await vi.advanceTimersByTimeAsync(estimateDelayMs);
}

describe('context panel', () => {
  it('turns Apply off while the verdict is "will not fit"', async () => {
    await showing(tooLong);
    expect(screen.getByTestId('verdict').dataset.verdict).toBe('will-not-fit');
    const button = screen.getByTestId('apply-context') as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    await fireEvent.click(button);
    expect(apply).not.toHaveBeenCalled();
  });

  it('writes each largest context exactly as the advice does, and puts it on the slider to apply', async () => {
    await showing(tooLong);
    expect(screen.getByTestId('kv-limit-q4').textContent).toContain('up to 4,720');
    expect(screen.getByTestId('kv-limit-q8').dataset.maxCtx).toBe('2736');
    for (const a of screen.getAllByTestId('advice-item')) {
      const n = /(\d[\d,]*) tokens/.exec(a.textContent ?? '')?.[1];
      const kv = /(q4|q8|f16) KV/.exec(a.textContent ?? '')?.[1];
      expect(screen.getByTestId(`kv-limit-${kv}`).textContent).toContain(`up to ${n}`);
    }
    ask.mockResolvedValue({ ...tooLong, ctx: 4720, kv: 'q4', verdict: 'tight', maxCtx: 4720, advice: [] });
    apply.mockResolvedValue({ state: 'ready', busy: false, running: 0, model: model({ ctx: 4720, kv: 'q4' }) });
    const q4 = screen.getByTestId('kv-limit-q4').querySelector('button') as HTMLButtonElement;
    await fireEvent.click(q4);
    expect(budget.ctx).toBe(4720); // not snapped to a slider stop
    expect(budget.kv).toBe('q4');
    await vi.advanceTimersByTimeAsync(estimateDelayMs);
    expect(ask).toHaveBeenLastCalledWith(4720, 'q4');
    const button = screen.getByTestId('apply-context') as HTMLButtonElement;
    await vi.waitFor(() => expect(button.disabled).toBe(false));
    await fireEvent.click(button);
    expect(apply).toHaveBeenCalledWith(4720, 'q4');
  });

  it('shows a mixture of experts resident and read beside the verdict', async () => {
    const GiB = 2 ** 30;
    await showing({ ...tooLong, weights: 17.3 * GiB, active: 1.9 * GiB, experts: 128, expertsUsed: 8 });
    expect(screen.getByTestId('weights-read').textContent).toContain('Weights 17.3 GiB resident · 1.9 GiB read per token (8 of 128 experts per token)');
    expect(screen.getByTestId('verdict').dataset.verdict).toBe('will-not-fit');
  });

  it('shows no read figure for a dense model', async () => {
    await showing(tooLong);
    expect(screen.queryByTestId('weights-read')).toBeNull();
  });

  it('names the KV mode as the header does', async () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
    ask.mockResolvedValue(estimate());
    render(ContextPanel);
    render(Header);
    const name = kvName(model());
    expect(name).toBe('q4 KV (rotated)');
    expect(screen.getByTestId('in-force').textContent).toContain(`with ${name}`);
    expect(screen.getByTestId('model-meta').textContent?.trim().startsWith(`${name} · `)).toBe(true);
    expect(kvName(model({ kv: 'q8', kvLabel: '' }))).toBe('q8 KV');
  });
});
