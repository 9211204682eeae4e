import { fireEvent, render, screen } from '@testing-library/svelte';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import * as md from '../markdown';
import Markdown from './Markdown.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());
vi.mock('../markdown', async (actual) => {
  const real = await actual<typeof import('../markdown')>();
  return { ...real, fragment: vi.fn(real.fragment) };
});

const parse = vi.mocked(md.fragment);

beforeEach(() => {
  parse.mockClear();
});

afterEach(() => {
  vi.useRealTimers();
});

describe('Markdown', () => {
  it('copies a code block with the Clipboard API', async () => {
    const writeText = vi.fn(async () => {});
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    render(Markdown, { text: 'Run:\n\n```sh\nmake app\n```' });
    const copy = screen.getByTestId('copy-code');
    await fireEvent.click(copy);
    await vi.waitFor(() => expect(copy.textContent).toBe('Copied'));
    expect(writeText).toHaveBeenCalledWith('make app');
  });

  it('falls back to execCommand when the Clipboard API refuses', async () => {
    const writeText = vi.fn(async () => {
      throw new Error('not allowed');
    });
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    let copied = '';
    const exec = vi.fn((cmd: string) => {
      copied = cmd === 'copy' ? (document.querySelector('textarea')?.value ?? '') : '';
      return true;
    });
    Object.defineProperty(document, 'execCommand', { value: exec, configurable: true });
    render(Markdown, { text: '```\nx = 1\n```' });
    await fireEvent.click(screen.getByTestId('copy-code'));
    await vi.waitFor(() => expect(exec).toHaveBeenCalledWith('copy'));
    expect(copied).toBe('x = 1');
    expect(document.querySelector('textarea')).toBeNull(); // cleaned up
  });

  it('opens web links in the browser, never in the popover', async () => {
    render(Markdown, { text: '[docs](https://example.com/docs)' });
    const link = screen.getByText('docs');
    const click = new MouseEvent('click', { bubbles: true, cancelable: true });
    link.dispatchEvent(click);
    expect(click.defaultPrevented).toBe(true);
    expect(engine.openURL).toHaveBeenCalledWith('https://example.com/docs');
  });

  it('parses a streaming reply at most once per animation frame', async () => {
    vi.useFakeTimers({ toFake: ['requestAnimationFrame', 'cancelAnimationFrame', 'setTimeout', 'performance'] });
    const view = render(Markdown, { text: '', live: true });
    const box = screen.getByTestId('markdown');
    parse.mockClear();
    let text = '';
    for (const piece of ['Hel', 'lo', ' **wor', 'ld**', '!']) {
      text += piece;
      await view.rerender({ text, live: true });
    }
    expect(parse).not.toHaveBeenCalled(); // waiting for the frame
    vi.advanceTimersToNextFrame();
    expect(parse).toHaveBeenCalledTimes(1);
    expect(box.textContent?.trim()).toBe('Hello world!');
    expect(box.querySelector('strong')?.textContent).toBe('world');

    // The end of the reply renders at once.
    await view.rerender({ text: text + ' Done.', live: false });
    expect(box.textContent?.trim()).toBe('Hello world! Done.');
  });
});
