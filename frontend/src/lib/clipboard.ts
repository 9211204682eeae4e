// Copying text: the app's clipboard (Wails) in the app, else the Clipboard
// API where the page may use it, else the older execCommand through a
// hidden textarea (WebKitGTK without a secure context, for one).

import { setClipboardText } from './engine';

export async function copyText(text: string): Promise<void> {
  if (await setClipboardText(text)) return;
  if (navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // Refused (no permission, page not focused): try the old way.
    }
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  area.select();
  try {
    if (!document.execCommand('copy')) throw new Error('the clipboard refused the text');
  } finally {
    area.remove();
  }
}
