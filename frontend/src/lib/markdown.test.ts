import { describe, expect, it } from 'vitest';
import { codeOf, external, fragment, render } from './markdown';

function dom(src: string): HTMLElement {
  const div = document.createElement('div');
  div.append(fragment(src));
  return div;
}

describe('markdown', () => {
  it('renders Markdown', () => {
    const d = dom('# Title\n\nSome **bold** and `code`.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |');
    expect(d.querySelector('h1')?.textContent).toBe('Title');
    expect(d.querySelector('strong')?.textContent).toBe('bold');
    expect(d.querySelectorAll('li')).toHaveLength(2);
    expect(d.querySelector('td')?.textContent).toBe('1');
  });

  it('keeps single newlines as line breaks, as chat models write poems', () => {
    expect(dom('line one\nline two').querySelectorAll('br')).toHaveLength(1);
  });

  it('removes scripts', () => {
    const html = render('Hi <script>window.pwned = 1</script> there');
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toContain('pwned');
  });

  it('removes event handlers', () => {
    const d = dom('<img src="x" onerror="window.pwned=1"> <a href="https://a.example" onclick="alert(1)">a</a> <div onmouseover="alert(1)">x</div>');
    expect(d.innerHTML).not.toMatch(/onerror|onclick|onmouseover/i);
    expect(d.querySelector('img')).toBeNull(); // no images: nothing is fetched
  });

  it('removes javascript: links, Markdown or HTML', () => {
    const d = dom('[click](javascript:alert(1)) and <a href="JaVaScRiPt:alert(2)">this</a> and [ok](https://example.com)');
    const hrefs = Array.from(d.querySelectorAll('a')).map((a) => a.getAttribute('href'));
    expect(hrefs.filter((h) => h && /javascript/i.test(h))).toEqual([]);
    expect(hrefs).toContain('https://example.com');
  });

  it('shows images as links instead of fetching them', () => {
    const d = dom('![a cat](https://example.com/cat.png)');
    expect(d.querySelector('img')).toBeNull();
    const a = d.querySelector('a');
    expect(a?.getAttribute('href')).toBe('https://example.com/cat.png');
    expect(a?.textContent).toBe('a cat');
  });

  it('renders code blocks with a copy button and escapes the code', () => {
    const d = dom('Try:\n\n```go\nfmt.Println("<b>hi</b>")\n```\n\nand\n\n```\nplain\n```');
    const blocks = d.querySelectorAll('[data-testid="code-block"]');
    expect(blocks).toHaveLength(2);
    const first = blocks[0] as HTMLElement;
    expect(first.querySelector('.code-lang')?.textContent).toBe('go');
    expect(first.querySelector('pre code b')).toBeNull();
    const copy = first.querySelector('[data-testid="copy-code"]');
    expect(copy?.tagName).toBe('BUTTON');
    expect(codeOf(copy as Element)).toBe('fmt.Println("<b>hi</b>")\n');
  });

  it('renders a code block still streaming (no closing fence)', () => {
    const d = dom('```py\nprint(1)\nprint(');
    expect(d.querySelectorAll('[data-testid="code-block"]')).toHaveLength(1);
    expect(d.querySelector('pre')?.textContent).toContain('print(');
  });

  it('does not let a reply inject buttons, forms or styles', () => {
    const d = dom('<button data-testid="copy-code">x</button><form><input></form><style>body{display:none}</style><p style="color:red">p</p>');
    expect(d.querySelector('button, form, input, style')).toBeNull();
    expect(d.querySelector('p')?.getAttribute('style')).toBeNull();
  });

  it('opens only web and mail links outside', () => {
    expect(external('https://example.com')).toBe(true);
    expect(external('mailto:a@example.com')).toBe(true);
    expect(external('#top')).toBe(false);
    expect(external('file:///etc/passwd')).toBe(false);
  });
});
