// The shapes of app/desktop/service's JSON. What the bound methods take
// and return comes from the generated bindings (wailsjs/go/models.ts);
// the event payloads, which the generator does not see, are written out
// here to match service/types.go.

import type { desktop, service } from './wailsjs/go/models';

/** Fields is a generated class as plain JSON: its data, not its helpers. */
type Fields<T> = { [K in keyof T as T[K] extends (...args: never[]) => unknown ? never : K]: T[K] };

export type Status = Fields<service.Status>;
export type Model = Fields<service.Model>;
export type Prepare = Fields<service.Prepare>;
export type Estimate = Fields<service.Estimate>;
export type Message = Fields<service.Message>;
export type SendRequest = Fields<service.SendRequest>;
export type SendResult = Fields<service.SendResult>;
export type Autotest = Fields<desktop.Autotest>;

export type Role = 'system' | 'user' | 'assistant';

/** chat:delta: streamed text of reply id. */
export interface Delta {
  id: string;
  text: string;
}

/** chat:progress: prefill of reply id. */
export interface Progress {
  id: string;
  prefilled: number;
  promptTokens: number;
}

export type FinishReason = 'stop' | 'length' | 'cancelled' | 'error';

/** chat:final: the end of reply id. */
export interface Final {
  id: string;
  finishReason: FinishReason;
  error?: string;
  text: string;
  promptTokens: number;
  reusedTokens: number;
  genTokens: number;
  ttftMs: number;
  prefillTokPerSec: number;
  decodeTokPerSec: number;
}
