// The shapes of app/desktop/service's JSON. What the bound methods take
// and return comes from the generated bindings (wailsjs/go/models.ts);
// the event payloads, which the generator does not see, are written out
// here to match service/types.go.

import type { desktop, service, settings } from './wailsjs/go/models';

/**
 * Fields is a generated class as plain JSON: its data, not its helpers,
 * down through nested classes, so stores and tests can build values as
 * object literals.
 */
export type Fields<T> = T extends (infer U)[]
  ? Fields<U>[]
  : T extends object
    ? { [K in keyof T as T[K] extends (...args: never[]) => unknown ? never : K]: Fields<T[K]> }
    : T;

export type Status = Fields<service.Status>;
export type Model = Fields<service.Model>;
export type KVCheck = Fields<service.KVCheck>;
export type KVCheckRow = Fields<service.KVCheckRow>;
export type Prepare = Fields<service.Prepare>;
export type Estimate = Fields<service.Estimate>;
export type KVLimit = Fields<service.KVLimit>;
export type Message = Fields<service.Message>;
export type SendRequest = Fields<service.SendRequest>;
export type SendResult = Fields<service.SendResult>;
export type Autotest = Fields<desktop.Autotest>;
export type LocalModel = Fields<service.LocalModel>;
export type LoadRequest = Fields<service.LoadRequest>;
export type CatalogEntry = Fields<service.CatalogEntry>;
export type CatalogFile = Fields<service.CatalogFile>;
export type Download = Fields<service.Download>;
export type ConversationSummary = Fields<service.ConversationSummary>;
export type Conversation = Fields<service.Conversation>;
export type StoredMessage = Fields<service.StoredMessage>;
export type ReplyStats = Fields<service.ReplyStats>;
export type Diagnostics = Fields<service.Diagnostics>;
export type Settings = Fields<settings.Settings>;
export type RemoteEndpoint = Fields<service.RemoteEndpoint>;
export type RemoteEndpointInput = Fields<service.RemoteEndpointInput>;
export type RemoteModel = Fields<service.RemoteModel>;
export type DocumentInfo = Fields<service.DocumentInfo>;
export type Source = Fields<service.Source>;
export type DocumentUse = Fields<service.DocumentUse>;
export type PromptTemplateInfo = Fields<service.PromptTemplateInfo>;
export type PromptTemplateRequest = Fields<service.PromptTemplateRequest>;
export type TemplatePreview = Fields<service.TemplatePreview>;
export type TemplateProblem = Fields<service.TemplateProblem>;
export type PromptPart = Fields<service.PromptPart>;
export type LastPrompt = Fields<service.LastPrompt>;

export type Role = 'system' | 'user' | 'assistant';

/** The KV cache types the context panel and settings offer. */
export const kvTypes = ['auto', 'q4', 'q8', 'f16'] as const;
export type KVType = (typeof kvTypes)[number];

/** Estimate.verdict. */
export type Verdict = 'fits' | 'tight' | 'will-not-fit' | 'unknown';

/** Download.state. */
export type DownloadState = 'starting' | 'downloading' | 'verifying' | 'done' | 'failed' | 'cancelled';

/** chat:delta: streamed text of reply id, and a reasoning model's thinking apart from it. */
export interface Delta {
  id: string;
  text: string;
  reasoning?: string;
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
  /** A reasoning model's thinking before text, and how long it took. */
  reasoning?: string;
  thinkingMs?: number;
  promptTokens: number;
  reusedTokens: number;
  /** Prompt tokens computed, not found in the cache. */
  prefillTokens?: number;
  genTokens: number;
  ttftMs: number;
  prefillTokPerSec: number;
  decodeTokPerSec: number;
  /** The reply limit it ran under (0 or absent: none). */
  maxTokens?: number;
}

/** history:changed: conversation id was created, appended to or deleted. */
export interface HistoryChanged {
  id: number;
}

// ---- quick actions, the global hotkey, the local server
export type QuickAction = Fields<settings.QuickAction>;
export type QuickActionResult = Fields<service.QuickActionResult>;
export type HotkeyStatus = Fields<service.HotkeyStatus>;
export type ServerStatus = Fields<service.ServerStatus>;

/** quickaction:run: run action name on text (the status item's menu). */
export interface QuickActionRequest {
  name: string;
  text: string;
}
