// The window: which tab shows.

export const tabs = ['chat', 'history', 'models', 'settings', 'diagnostics'] as const;
export type Tab = (typeof tabs)[number];

export class UI {
  tab = $state<Tab>('chat');

  show(tab: Tab): void {
    this.tab = tab;
  }
}

export const ui = new UI();
