import { describe, expect, it } from 'vitest';
import { bytes, eta, expectedRate, expertsPerToken, messageLines, residentRead, thoughtFor, tokens } from './format';

describe('format', () => {
  it('writes context lengths as model cards do, and exactly', () => {
    expect(tokens(4096)).toBe('4K');
    expect(tokens(1536)).toBe('1.5K');
    expect(tokens(131072)).toBe('128K');
    expect(tokens(1 << 20)).toBe('1M');
    expect(tokens(2600)).toBe('2600'); // not rounded to a K
    expect(tokens(512)).toBe('512');
  });

  it('writes resident and read weights for a mixture, nothing for a dense model', () => {
    const GiB = 2 ** 30;
    expect(residentRead({ weights: 17.3 * GiB, active: 1.9 * GiB })).toBe('17.3 GiB resident · 1.9 GiB read per token');
    expect(residentRead({ weights: 17.3 * GiB, active: 1.9 * GiB, activeApprox: true })).toBe('17.3 GiB resident · ≈ 1.9 GiB read per token');
    expect(residentRead({ weights: 4 * GiB, active: 0 })).toBe('');
    expect(expertsPerToken({ experts: 128, expertsUsed: 8 })).toBe('8 of 128 experts per token');
    expect(expertsPerToken({ experts: 0, expertsUsed: 0 })).toBe('');
  });

  it('writes expected speeds rounded, and none for no figure', () => {
    expect(expectedRate(42.4)).toBe('~42 tok/s');
    expect(expectedRate(3.46)).toBe('~3.5 tok/s');
    expect(expectedRate(0)).toBe('');
    expect(expectedRate(Number.NaN)).toBe('');
  });

  it('says how long a model thought', () => {
    expect(thoughtFor(3210)).toBe('Thought for 3 s');
    expect(thoughtFor(420)).toBe('Thought for 0.4 s');
    expect(thoughtFor(12)).toBe('Thought for 0.1 s');
    expect(thoughtFor(65_000)).toBe('Thought for 1 min 5 s');
    expect(thoughtFor(120_000)).toBe('Thought for 2 min');
    expect(thoughtFor(undefined)).toBe('Thoughts');
    expect(thoughtFor(0)).toBe('Thoughts');
  });

  it('writes sizes and times left', () => {
    expect(bytes(1536)).toBe('1.5 KiB');
    expect(bytes(3 * 2 ** 30)).toBe('3.0 GiB');
    expect(eta(42)).toBe('42 s');
    expect(eta(3725)).toBe('1 h 2 min');
    expect(eta(-1)).toBe('—');
  });

  it("splits an error into its lines, the Go side's one bad field a line", () => {
    expect(messageLines(new Error('a: bad\n\n  b: worse  \n'))).toEqual(['a: bad', 'b: worse']);
    expect(messageLines('plain')).toEqual(['plain']);
  });
});
