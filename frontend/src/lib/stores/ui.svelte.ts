// The window: which tab shows, and whether Escape may hide it.

import * as engine from '../engine';

export const tabs = ['chat', 'history', 'models', 'settings', 'diagnostics'] as const;
export type Tab = (typeof tabs)[number];

export class UI {
  tab = $state<Tab>('chat');
  /**
   * A menu-bar item can show the window again once hidden (macOS). Where
   * there is none (Linux) a hidden window could never come back, so it
   * stays false until the Go side says otherwise.
   */
  canHide = $state(false);

  show(tab: Tab): void {
    this.tab = tab;
  }

  /** connectWindow asks the Go side whether the window may hide. */
  async connectWindow(): Promise<void> {
    try {
      this.canHide = await engine.canHideWindow();
    } catch {
      this.canHide = false;
    }
  }

  /**
   * onKeydown: Escape hides the popover, as clicking outside it does, but
   * only where the menu-bar item can bring it back; elsewhere Escape is
   * left to the page.
   */
  onKeydown(e: KeyboardEvent): void {
    if (e.key !== 'Escape' || e.defaultPrevented || e.isComposing || !this.canHide) return;
    e.preventDefault();
    engine.hideWindow().catch(() => {});
  }
}

export const ui = new UI();
