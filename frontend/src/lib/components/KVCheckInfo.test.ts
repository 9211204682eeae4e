import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { kvCheckLine } from '../kvCheck';
import { budget } from '../stores/budget.svelte';
import { engineStatus } from '../stores/engineStatus.svelte';
import { estimate, model } from '../../test/fakeEngine';
import type { KVCheck } from '../types';
import ContextPanel from './ContextPanel.svelte';
import Header from './Header.svelte';
import KVCheckInfo from './KVCheckInfo.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const running: KVCheck = { state: 'running', done: 35, total: 88, cached: false };
const reason = 'q4-rot falls to top-1 53.0%, cosine 0.99151; q8 keeps top-1 ≥ 90% and cosine ≥ 0.999';
const choseQ8: KVCheck = {
  state: 'done',
  done: 88,
  total: 88,
  cached: false,
  chosen: 'q8',
  reason,
  summary: `q8 (top-1 94.8%, cos 0.99995): ${reason}`,
  scaleRatio: 8,
  tokens: 349,
  elapsedMs: 1236,
  rows: [
    { mode: 'q4-rot', top1: 0.5301, cosine: 0.99151, passed: false },
    { mode: 'q8', top1: 0.9484, cosine: 0.999948, passed: true },
    { mode: 'q4-plain', top1: 0.5559, cosine: 0.963916, passed: false, info: true, skipped: 'attention scale 8.00× the usual 1/sqrt(64)' },
  ],
  note: `KV switched to q8: ${reason}`,
};

describe('KV check', () => {
  beforeEach(() => {
    vi.clearAllMocks();
    vi.mocked(engine.estimate).mockResolvedValue(estimate());
    budget.follow(undefined);
  });

  it('words each state', () => {
    expect(kvCheckLine(running)).toBe('Checking KV quality… 39%');
    expect(kvCheckLine({ ...choseQ8, cached: true })).toBe('KV check: q8 (checked earlier)');
    expect(kvCheckLine({ state: 'failed', done: 3, total: 88, cached: false, error: 'kv choice (f16): out of memory' })).toBe(
      'KV check failed: kv choice (f16): out of memory',
    );
  });

  it('shows progress while it runs', () => {
    render(KVCheckInfo, { check: running });
    expect(screen.getByTestId('kv-check-line').textContent).toBe('Checking KV quality… 39%');
    expect((screen.getByTestId('kv-check-progress') as HTMLProgressElement).value).toBe(39);
    expect(screen.queryByTestId('kv-check-table')).toBeNull();
  });

  it('shows the figures, the choice, the reason and the switch', () => {
    render(KVCheckInfo, { check: choseQ8 });
    expect(screen.getByTestId('kv-check-line').textContent).toBe('KV check: q8');
    expect(screen.getByTestId('kv-check-reason').textContent).toBe(reason);
    const rows = screen.getAllByTestId('kv-check-row');
    expect(rows.map((r) => r.dataset.mode)).toEqual(['q4-rot', 'q8', 'q4-plain']);
    const [q4rot, q8, q4plain] = rows as [HTMLElement, HTMLElement, HTMLElement];
    expect(q4rot.textContent).toContain('53.0%');
    expect(q4rot.textContent).toContain('fails');
    expect(q8.classList.contains('chosen')).toBe(true);
    expect(q8.textContent).toContain('0.99995');
    expect(q4plain.textContent).toContain('not eligible: attention scale 8.00×');
    expect(screen.getByTestId('kv-check-facts').textContent).toMatch(/349 tokens against f16 · attention scale 8\.00× 1\/√d · 1\.2 s/);
    expect(screen.getByTestId('kv-check-note').textContent).toBe(`KV switched to q8: ${reason}`);
    expect(screen.queryByTestId('kv-check-progress')).toBeNull();
  });

  it('is part of the context panel, whose line in force names the rotated cache', () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ kvCheck: running }) };
    render(ContextPanel);
    expect(screen.getByTestId('in-force').textContent).toBe('In force: 4K with q4 KV (rotated)');
    expect(screen.getByTestId('kv-check').dataset.state).toBe('running');
  });

  it('shows in the header: the rotated label, progress, then the note until dismissed', async () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ kvCheck: running }) };
    render(Header);
    expect(screen.getByTestId('model-meta').textContent).toMatch(/^\s*q4 KV \(rotated\) · 4K context/);
    expect(screen.getByTestId('header-kv-check').textContent).toBe('Checking KV quality… 39%');
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ kv: 'q8', kvLabel: 'q8 KV', kvCheck: choseQ8 }) };
    await vi.waitFor(() => expect(screen.queryByTestId('header-kv-check')).toBeNull());
    expect(screen.getByTestId('model-meta').textContent).toMatch(/^\s*q8 KV · 4K context/);
    const note = screen.getByTestId('header-kv-note');
    expect(note.textContent).toContain(`KV switched to q8: ${reason}`);
    await fireEvent.click(note.querySelector('button') as HTMLButtonElement);
    expect(screen.queryByTestId('header-kv-note')).toBeNull();
  });
});
