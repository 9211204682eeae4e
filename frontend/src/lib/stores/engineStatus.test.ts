import { describe, expect, it } from 'vitest';
import { EngineStatus } from './engineStatus.svelte';
import type { Status } from '../types';

const status = (seq: number | undefined, kvLabel: string): Status =>
  ({ state: 'ready', busy: false, running: 0, seq, model: { kvLabel } }) as unknown as Status;

describe('EngineStatus', () => {
  it('keeps the status the engine read last when an older one arrives after it', () => {
    const es = new EngineStatus();
    es.set(status(7, 'q8 KV'));
    es.set(status(5, 'q4 KV (rotated)'));
    expect(es.status.seq).toBe(7);
    expect(es.status.model?.kvLabel).toBe('q8 KV');
    es.set(status(8, 'q4 KV'));
    expect(es.status.model?.kvLabel).toBe('q4 KV');
  });

  it('takes a status without a sequence number (an engine that does not send one)', () => {
    const es = new EngineStatus();
    es.set(status(3, 'q8 KV'));
    es.set(status(undefined, 'q4 KV'));
    expect(es.status.model?.kvLabel).toBe('q4 KV');
  });
});
