// Markdown of model replies as sanitized HTML: marked parses (GitHub
// flavour, single newlines kept as line breaks, as chat models write
// them), DOMPurify removes scripts, event handlers and javascript: links
// from the result, and each code block gets a header with a copy button.
// Images are shown as links: a reply must not make the app fetch anything.

import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    image({ href, text }) {
      return `<a href="${escapeAttr(href)}">${escapeHTML(text || href)}</a>`;
    },
  },
});

const purifyOptions = {
  // No styles (a reply cannot restyle the window), no images or media
  // (nothing is fetched), no forms.
  FORBID_TAGS: ['style', 'img', 'picture', 'video', 'audio', 'source', 'form', 'input', 'button', 'textarea', 'select'],
  FORBID_ATTR: ['style', 'srcset'],
};

function escapeHTML(s: string): string {
  return s.replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c] ?? c);
}

function escapeAttr(s: string): string {
  return escapeHTML(s).replace(/"/g, '&quot;');
}

/** fragment renders src as sanitized DOM nodes, code blocks with copy buttons. */
export function fragment(src: string): DocumentFragment {
  const html = marked.parse(src, { async: false });
  const frag = DOMPurify.sanitize(html, { ...purifyOptions, RETURN_DOM_FRAGMENT: true });
  for (const pre of Array.from(frag.querySelectorAll('pre'))) {
    const code = pre.querySelector('code');
    const lang = /(?:^|\s)language-(\S+)/.exec(code?.className ?? '')?.[1] ?? '';
    const block = document.createElement('div');
    block.className = 'code-block';
    block.dataset.testid = 'code-block';
    const head = document.createElement('div');
    head.className = 'code-head';
    const label = document.createElement('span');
    label.className = 'code-lang';
    label.textContent = lang;
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'copy-code';
    copy.dataset.testid = 'copy-code';
    copy.textContent = 'Copy';
    copy.title = 'Copy the code';
    head.append(label, copy);
    pre.replaceWith(block);
    block.append(head, pre);
  }
  for (const a of Array.from(frag.querySelectorAll('a'))) {
    a.rel = 'noopener noreferrer';
    const href = a.getAttribute('href');
    if (href) a.title = href;
  }
  return frag;
}

/** render is fragment as an HTML string. */
export function render(src: string): string {
  const div = document.createElement('div');
  div.append(fragment(src));
  return div.innerHTML;
}

/** codeOf is the text of the code block a copy button belongs to. */
export function codeOf(button: Element): string {
  return button.closest('[data-testid="code-block"]')?.querySelector('pre')?.textContent ?? '';
}

/** external says whether a link leaves the app (opened in the browser). */
export function external(href: string): boolean {
  return /^(https?:|mailto:)/i.test(href);
}
