// The one module that talks to the Go side. It wraps the bindings that
// `make bindings` (wails generate module) writes into ./wailsjs: the
// methods bound as window.go.desktop.App and the window.runtime events.
// Everything else imports from here, so a change of transport touches this
// file only (and tests replace this one module).

import * as App from './wailsjs/go/desktop/App';
import { service, settings } from './wailsjs/go/models';
import { BrowserOpenURL, ClipboardGetText, ClipboardSetText, EventsOn, OnFileDrop, OnFileDropOff } from './wailsjs/runtime/runtime';
import type {
  Autotest,
  CatalogEntry,
  Conversation,
  ConversationSummary,
  Delta,
  Diagnostics,
  DocumentInfo,
  Download,
  Estimate,
  Final,
  HistoryChanged,
  HotkeyStatus,
  LastPrompt,
  LocalModel,
  Message,
  Prepare,
  QuickActionRequest,
  QuickActionResult,
  Progress,
  PromptTemplateInfo,
  PromptTemplateRequest,
  RemoteEndpoint,
  RemoteEndpointInput,
  RemoteModel,
  SendResult,
  ServerStatus,
  Settings,
  Status,
  TemplatePreview,
} from './types';

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
    runtime?: Record<string, unknown>;
  }
}

/** runtimeHas says whether the Wails runtime offers name (not in a browser). */
const runtimeHas = (name: string): boolean => typeof window.runtime?.[name] === 'function';

/** call runs a bound method; Go's errors arrive as strings, made Errors here. */
async function call<T>(f: () => Promise<T>): Promise<T> {
  if (!window.go?.desktop?.App) throw new EngineUnavailable();
  try {
    return await f();
  } catch (e) {
    throw e instanceof Error ? e : new Error(String(e));
  }
}

// ---- the engine and chat
export const status = (): Promise<Status> => call(() => App.Status());
/** noReplyLimit, as send's maxTokens, lets the reply run to the end of the context (0: the settings' limit). */
export const noReplyLimit = -1;
/**
 * send starts a reply to messages. With replaceLast, the conversation's
 * last exchange in the history gives way to this one (a regenerated reply,
 * an edited question).
 */
export const send = (
  messages: Message[],
  maxTokens = 0,
  conversationId = 0,
  documents: string[] = [],
  replaceLast = false,
  thinking: ThinkingChoice = '',
): Promise<SendResult> => call(() => App.Send(service.SendRequest.createFrom({ messages, maxTokens, conversationId, documents, replaceLast, thinking })));
/** A chat's reasoning switch (SendRequest.thinking): "" is the model's default, thinking on. */
export type ThinkingChoice = '' | 'off' | 'low' | 'medium' | 'high';
export const stop = (id: string): Promise<void> => call(() => App.Stop(id));
export const autotest = (): Promise<Autotest> => call(() => App.Autotest());

// ---- models and the context budget
export const models = (): Promise<LocalModel[]> => call(() => App.Models()).then((l) => l ?? []);
export const addModel = (path: string): Promise<LocalModel> => call(() => App.AddModel(path));
export const forgetModel = (path: string): Promise<void> => call(() => App.ForgetModel(path));
export const chooseModelFile = (): Promise<string> => call(() => App.ChooseModelFile());
export const checkLoad = (path: string, ctx = 0, kv = ''): Promise<Estimate> =>
  call(() => App.CheckLoad(service.LoadRequest.createFrom({ path, ctx, kv })));
export const loadModel = (path: string, ctx = 0, kv = ''): Promise<Status> =>
  call(() => App.LoadModel(service.LoadRequest.createFrom({ path, ctx, kv })));
export const estimate = (ctx: number, kv: string): Promise<Estimate> => call(() => App.Estimate(ctx, kv));
export const applyContext = (ctx: number, kv: string): Promise<Status> => call(() => App.ApplyContext(ctx, kv));

// ---- prompt templates per model file ('' = the loaded model)
export const promptTemplate = (path: string): Promise<PromptTemplateInfo> => call(() => App.PromptTemplate(path));
export const previewPromptTemplate = (req: PromptTemplateRequest): Promise<TemplatePreview> =>
  call(() => App.PreviewPromptTemplate(service.PromptTemplateRequest.createFrom(req)));
export const savePromptTemplate = (req: PromptTemplateRequest): Promise<PromptTemplateInfo> =>
  call(() => App.SavePromptTemplate(service.PromptTemplateRequest.createFrom(req)));
export const clearPromptTemplate = (path: string): Promise<PromptTemplateInfo> => call(() => App.ClearPromptTemplate(path));
export const lastPrompt = (): Promise<LastPrompt> => call(() => App.LastPrompt());

// ---- catalog and downloads
export const catalog = (): Promise<CatalogEntry[]> => call(() => App.Catalog()).then((l) => l ?? []);
export const catalogEstimate = (id: string, quant: string): Promise<Estimate> =>
  call(() => App.CatalogEstimate(id, quant));
export const download = (id: string, quant: string): Promise<Download> => call(() => App.Download(id, quant));
export const cancelDownload = (id: string, quant: string): Promise<void> =>
  call(() => App.CancelDownload(id, quant));
export const downloads = (): Promise<Download[]> => call(() => App.Downloads()).then((l) => l ?? []);

// ---- history
export const conversations = (query: string): Promise<ConversationSummary[]> =>
  call(() => App.Conversations(query)).then((l) => l ?? []);
export const conversation = (id: number): Promise<Conversation> => call(() => App.Conversation(id));
/** openConversation restores a conversation for the chat, its documents attached again. */
export const openConversation = (id: number): Promise<Conversation> => call(() => App.OpenConversation(id));
export const deleteConversation = (id: number): Promise<void> => call(() => App.DeleteConversation(id));
export const exportConversation = (id: number): Promise<string> => call(() => App.ExportConversation(id));
export const saveConversation = (id: number): Promise<string> => call(() => App.SaveConversation(id));

// ---- quick actions, the global hotkey, the local server
export const runQuickAction = (name: string, text: string): Promise<QuickActionResult> =>
  call(() => App.RunQuickAction(name, text));
export const hotkeyStatus = (): Promise<HotkeyStatus> => call(() => App.HotkeyStatus());
export const serverStatus = (): Promise<ServerStatus> => call(() => App.ServerStatus());

/**
 * clipboardText is the clipboard's text: the app's (Wails), else the
 * page's where the browser lets it read; "" when there is none or
 * neither can be read.
 */
export async function clipboardText(): Promise<string> {
  if (runtimeHas('ClipboardGetText')) {
    try {
      const text = await ClipboardGetText();
      if (text) return text;
    } catch {
      // No clipboard through the app (a browser driving the dev build).
    }
  }
  try {
    return (await navigator.clipboard?.readText?.()) ?? '';
  } catch {
    return ''; // refused (no permission, page not focused)
  }
}

/**
 * setClipboardText puts text on the app's clipboard (Wails); false when
 * there is none (a browser) or it refused, for the caller to try the page's.
 */
export async function setClipboardText(text: string): Promise<boolean> {
  if (!runtimeHas('ClipboardSetText')) return false;
  try {
    return await ClipboardSetText(text);
  } catch {
    return false;
  }
}

// ---- documents attached to the chat
export const attachDocumentFile = (path: string): Promise<DocumentInfo> => call(() => App.AttachDocumentFile(path));
export const attachDocumentData = (name: string, dataBase64: string): Promise<DocumentInfo> =>
  call(() => App.AttachDocumentData(name, dataBase64));
export const removeDocument = (id: string): Promise<void> => call(() => App.RemoveDocument(id));
export const documents = (ids: string[]): Promise<DocumentInfo[]> => call(() => App.Documents(ids)).then((l) => l ?? []);

// ---- remote models (OpenAI-compatible endpoints; a key goes in, never comes back)
export const remoteEndpoints = (): Promise<RemoteEndpoint[]> => call(() => App.RemoteEndpoints()).then((l) => l ?? []);
export const remoteModels = (input: RemoteEndpointInput): Promise<RemoteModel[]> =>
  call(() => App.RemoteModels(service.RemoteEndpointInput.createFrom(input))).then((l) => l ?? []);
export const saveRemoteEndpoint = (input: RemoteEndpointInput): Promise<RemoteEndpoint[]> =>
  call(() => App.SaveRemoteEndpoint(service.RemoteEndpointInput.createFrom(input))).then((l) => l ?? []);
export const removeRemoteEndpoint = (name: string): Promise<RemoteEndpoint[]> =>
  call(() => App.RemoveRemoteEndpoint(name)).then((l) => l ?? []);
export const useRemote = (name: string): Promise<Status> => call(() => App.UseRemote(name));

// ---- settings, diagnostics, the window
export const getSettings = (): Promise<Settings> => call(() => App.Settings());
export const updateSettings = (s: Settings): Promise<Settings> =>
  call(() => App.UpdateSettings(settings.Settings.createFrom(s)));
export const diagnostics = (): Promise<Diagnostics> => call(() => App.Diagnostics());
export const hideWindow = (): Promise<void> => call(() => App.HideWindow());
/** canHideWindow: a menu-bar item can show the window again once hidden (macOS); without one Escape keeps it. */
export const canHideWindow = (): Promise<boolean> => call(() => App.CanHideWindow());

/** openURL opens a link in the user's browser, not in the popover. */
export function openURL(url: string): void {
  if (runtimeHas('BrowserOpenURL')) BrowserOpenURL(url);
  else window.open(url, '_blank', 'noopener');
}

/** The events of app/desktop/service and what each carries. */
export interface Events {
  'model:status': Status;
  'model:progress': Prepare;
  'chat:delta': Delta;
  'chat:progress': Progress;
  'chat:final': Final;
  'models:changed': LocalModel[];
  'download:progress': Download;
  'history:changed': HistoryChanged;
  'document:changed': DocumentInfo;
  'quickaction:run': QuickActionRequest;
  'prompt:open': null;
  'server:status': ServerStatus;
}

/** on subscribes to an event of the Go side; it returns the unsubscriber. */
export function on<K extends keyof Events>(name: K, handler: (data: Events[K]) => void): () => void {
  if (!runtimeHas('EventsOnMultiple')) return () => {};
  return EventsOn(name, (data: unknown) => handler(data as Events[K]));
}

/**
 * onFileDrop receives the paths of files dropped on the window (the app
 * only: the Go side enables file drops, and a browser gives no paths).
 */
export function onFileDrop(handler: (paths: string[]) => void): () => void {
  if (runtimeHas('OnFileDrop')) {
    OnFileDrop((_x, _y, paths) => handler(paths ?? []), false);
    return () => OnFileDropOff();
  }
  // A runtime without the helper still delivers the drop as this event.
  if (runtimeHas('EventsOnMultiple')) {
    return EventsOn('wails:file-drop', (_x: number, _y: number, paths?: string[]) => handler(paths ?? []));
  }
  return () => {};
}
