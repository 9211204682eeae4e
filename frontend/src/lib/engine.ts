// The one module that talks to the Go side. It wraps the bindings that
// `make bindings` (wails generate module) writes into ./wailsjs: the
// methods bound as window.go.desktop.App and the window.runtime events.
// Everything else imports from here, so a change of transport touches this
// file only.

import * as App from './wailsjs/go/desktop/App';
import { service } from './wailsjs/go/models';
import { EventsOn } from './wailsjs/runtime/runtime';
import type { Autotest, Delta, Estimate, Final, Message, Prepare, Progress, SendResult, Status } from './types';

/** The page runs outside the app (a plain browser, a test without Go). */
export class EngineUnavailable extends Error {
  constructor() {
    super('the Nibble engine is not reachable: this page runs outside the app');
    this.name = 'EngineUnavailable';
  }
}

declare global {
  interface Window {
    go?: { desktop?: { App?: unknown } };
    runtime?: unknown;
  }
}

/** call runs a bound method; Go's errors arrive as strings, made Errors here. */
async function call<T>(f: () => Promise<T>): Promise<T> {
  if (!window.go?.desktop?.App) throw new EngineUnavailable();
  try {
    return await f();
  } catch (e) {
    throw e instanceof Error ? e : new Error(String(e));
  }
}

export const status = (): Promise<Status> => call(() => App.Status());
export const loadModel = (path: string, ctx = 0, kv = ''): Promise<Status> =>
  call(() => App.LoadModel(new service.LoadRequest({ path, ctx, kv })));
export const send = (messages: Message[], maxTokens = 0, conversationId = 0): Promise<SendResult> =>
  call(() => App.Send(new service.SendRequest({ messages, maxTokens, conversationId })));
export const stop = (id: string): Promise<void> => call(() => App.Stop(id));
export const estimate = (ctx: number, kv: string): Promise<Estimate> => call(() => App.Estimate(ctx, kv));
export const autotest = (): Promise<Autotest> => call(() => App.Autotest());

/** The events of app/desktop/service and what each carries. */
interface Events {
  'model:status': Status;
  'model:progress': Prepare;
  'chat:delta': Delta;
  'chat:progress': Progress;
  'chat:final': Final;
}

/** on subscribes to an event of the Go side; it returns the unsubscriber. */
export function on<K extends keyof Events>(name: K, handler: (data: Events[K]) => void): () => void {
  if (!window.runtime) return () => {};
  return EventsOn(name, (data: unknown) => handler(data as Events[K]));
}
