// The Models tab's remote endpoints: OpenAI-compatible servers (a
// llama-server, an Ollama, a vLLM cluster, another Nibble) that chats can
// go to instead of the local model. The Go side keeps the keys; this
// store only sends one when an endpoint is added.

import * as engine from '../engine';
import { message } from '../format';
import type { RemoteEndpoint, RemoteEndpointInput, RemoteModel } from '../types';
import { engineStatus } from './engineStatus.svelte';

export class Remote {
  endpoints = $state<RemoteEndpoint[]>([]);
  /** The models the server of the form's URL lists (after Connect). */
  models = $state<RemoteModel[]>([]);
  /** What is being done: connecting, saving, or using an endpoint's name. */
  busy = $state<string | null>(null);
  /** Why the form's Connect or Add failed, else null. */
  formError = $state<string | null>(null);
  /** Why listing, removing or using an endpoint failed, else null. */
  error = $state<string | null>(null);

  async refresh(): Promise<void> {
    try {
      this.endpoints = await engine.remoteEndpoints();
    } catch (e) {
      this.error = message(e);
    }
  }

  /** connect lists the models of the server in the form; false on failure. */
  async connect(input: RemoteEndpointInput): Promise<boolean> {
    this.busy = 'connecting';
    this.formError = null;
    this.models = [];
    try {
      this.models = await engine.remoteModels(input);
      if (this.models.length === 0) this.formError = 'The server lists no models.';
      return this.models.length > 0;
    } catch (e) {
      this.formError = message(e);
      return false;
    } finally {
      this.busy = null;
    }
  }

  /** save adds (or replaces) an endpoint; false and formError when refused. */
  async save(input: RemoteEndpointInput): Promise<boolean> {
    this.busy = 'saving';
    this.formError = null;
    try {
      this.endpoints = await engine.saveRemoteEndpoint(input);
      this.models = [];
      return true;
    } catch (e) {
      this.formError = message(e);
      return false;
    } finally {
      this.busy = null;
    }
  }

  async remove(name: string): Promise<void> {
    this.error = null;
    try {
      this.endpoints = await engine.removeRemoteEndpoint(name);
      engineStatus.set(await engine.status());
    } catch (e) {
      this.error = message(e);
    }
  }

  /** use sends chats to the endpoint called name ("": the local model). */
  async use(name: string): Promise<boolean> {
    this.busy = name || 'local';
    this.error = null;
    try {
      engineStatus.set(await engine.useRemote(name));
      return true;
    } catch (e) {
      this.error = message(e);
      return false;
    } finally {
      this.busy = null;
      await this.refresh();
    }
  }
}

export const remote = new Remote();
