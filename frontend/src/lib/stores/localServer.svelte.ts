// The Settings section for what runs beside the popover: the local
// OpenAI-compatible server (switch, address, token) and the global hotkey.

import * as engine from '../engine';
import { message, messageLines } from '../format';
import type { HotkeyStatus, ServerStatus, Settings } from '../types';
import { settings } from './settings.svelte';

/** settings.DefaultServerAddress. */
export const defaultAddress = '127.0.0.1:11435';

export interface ServerForm {
  enabled: boolean;
  address: string;
  token: string;
  hotkey: string;
}

export class LocalServer {
  form = $state<ServerForm>({ enabled: false, address: defaultAddress, token: '', hotkey: '' });
  status = $state<ServerStatus>({ enabled: false, running: false });
  hotkey = $state<HotkeyStatus>({ supported: false, hotkey: '' });
  /** What the last save refused, a line each. */
  errors = $state<string[]>([]);
  saving = $state(false);
  justSaved = $state(false);

  connect(): () => void {
    return engine.on('server:status', (st) => (this.status = st));
  }

  /** load fills the form from the settings and asks how things stand. */
  async load(): Promise<void> {
    try {
      this.#take(await engine.getSettings());
      await this.refresh();
    } catch (e) {
      this.errors = [message(e)];
    }
  }

  async refresh(): Promise<void> {
    const [st, hk] = await Promise.all([engine.serverStatus(), engine.hotkeyStatus()]);
    this.status = st;
    this.hotkey = hk;
  }

  #take(s: Settings): void {
    this.form = {
      enabled: s.server?.enabled ?? false,
      address: s.server?.address || defaultAddress,
      token: s.server?.token ?? '',
      hotkey: s.hotkey ?? '',
    };
  }

  edited(): void {
    this.justSaved = false;
  }

  /** save stores the section's fields; the server and hotkey follow at once. */
  async save(): Promise<boolean> {
    this.justSaved = false;
    this.saving = true;
    try {
      const f = this.form;
      const saved = await settings.change((cur) => ({
        ...cur,
        hotkey: f.hotkey.trim(),
        server: { ...cur.server, enabled: f.enabled, address: f.address.trim(), token: f.token.trim() },
      }));
      this.#take(saved);
      await this.refresh();
      this.errors = [];
      this.justSaved = true;
      return true;
    } catch (e) {
      this.errors = messageLines(e);
      return false;
    } finally {
      this.saving = false;
    }
  }

  /** toggle flips the server's switch and saves at once. */
  async toggle(on: boolean): Promise<void> {
    this.form.enabled = on;
    await this.save();
  }
}

export const localServer = new LocalServer();
