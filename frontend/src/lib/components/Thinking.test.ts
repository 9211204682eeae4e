import { fireEvent, render, screen } from '@testing-library/svelte';
import { describe, expect, it } from 'vitest';
import Thinking from './Thinking.svelte';

describe('the Thinking section', () => {
  it('is open while the model thinks and closes when the answer starts', async () => {
    const { rerender } = render(Thinking, { reasoning: 'Hmm', thinking: true });
    const section = screen.getByTestId('thinking') as HTMLDetailsElement;
    await rerender({ reasoning: 'Hmm', thinking: true });
    expect(section.open).toBe(true);
    expect(screen.getByTestId('thinking-toggle').textContent).toBe('Thinking…');
    await rerender({ reasoning: 'Hmm, yes.', thinking: false, thinkingMs: 3200 });
    expect(section.open).toBe(false);
    expect(screen.getByTestId('thinking-toggle').textContent).toBe('Thought for 3 s');
    expect(screen.getByTestId('thinking-text').textContent).toBe('Hmm, yes.');
  });

  it('is collapsed for a finished reply and opens on a click', async () => {
    render(Thinking, { reasoning: 'Because.', thinkingMs: 500 });
    const section = screen.getByTestId('thinking') as HTMLDetailsElement;
    expect(section.open).toBe(false);
    expect(screen.getByTestId('thinking-toggle').textContent).toBe('Thought for 0.5 s');
    await fireEvent.click(screen.getByTestId('thinking-toggle'));
    expect(section.open).toBe(true);
    await fireEvent.click(screen.getByTestId('thinking-toggle'));
    expect(section.open).toBe(false);
  });
});
