// A stand-in for lib/engine.ts: every bound method is a vi.fn, and events
// go through a small bus the tests emit on. Use it as
//
//	vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());
//
// and reach the mocks through `import * as engine from '../engine'`.

import { vi } from 'vitest';
import type * as Engine from '../lib/engine';
import type { Estimate, Model, Settings, Status } from '../lib/types';

type Handler = (data: never) => void;
const handlers = new Map<string, Set<Handler>>();

/** emit delivers an event of the Go side to the subscribed stores. */
export function emit<K extends keyof Engine.Events>(name: K, data: Engine.Events[K]): void {
  for (const h of handlers.get(name) ?? []) (h as (d: Engine.Events[K]) => void)(data);
}

/** listeners is how many handlers event name has. */
export function listeners(name: keyof Engine.Events): number {
  return handlers.get(name)?.size ?? 0;
}

export function fakeEngine(): typeof Engine {
  class EngineUnavailable extends Error {}
  const fake = {
    EngineUnavailable,
    status: vi.fn(async (): Promise<Status> => ({ state: 'starting', busy: false, running: 0 })),
    send: vi.fn(),
    stop: vi.fn(async () => {}),
    autotest: vi.fn(async () => ({ prompt: '', stopAfter: 0 })),
    models: vi.fn(async () => []),
    addModel: vi.fn(),
    forgetModel: vi.fn(async () => {}),
    chooseModelFile: vi.fn(async () => ''),
    checkLoad: vi.fn(),
    loadModel: vi.fn(),
    estimate: vi.fn(),
    applyContext: vi.fn(),
    promptTemplate: vi.fn(),
    previewPromptTemplate: vi.fn(),
    savePromptTemplate: vi.fn(),
    clearPromptTemplate: vi.fn(),
    lastPrompt: vi.fn(),
    catalog: vi.fn(async () => []),
    catalogEstimate: vi.fn(),
    download: vi.fn(),
    cancelDownload: vi.fn(async () => {}),
    downloads: vi.fn(async () => []),
    conversations: vi.fn(async () => []),
    conversation: vi.fn(),
    openConversation: vi.fn(),
    deleteConversation: vi.fn(async () => {}),
    exportConversation: vi.fn(async () => ''),
    saveConversation: vi.fn(async () => ''),
    attachDocumentFile: vi.fn(),
    attachDocumentData: vi.fn(),
    removeDocument: vi.fn(async () => {}),
    documents: vi.fn(async () => []),
    getSettings: vi.fn(),
    updateSettings: vi.fn(),
    diagnostics: vi.fn(),
    hideWindow: vi.fn(async () => {}),
    canHideWindow: vi.fn(async () => false),
    remoteEndpoints: vi.fn(async () => []),
    remoteModels: vi.fn(),
    saveRemoteEndpoint: vi.fn(),
    removeRemoteEndpoint: vi.fn(),
    useRemote: vi.fn(),
    runQuickAction: vi.fn(),
    hotkeyStatus: vi.fn(async () => ({ supported: false, hotkey: '' })),
    serverStatus: vi.fn(async () => ({ enabled: false, running: false })),
    clipboardText: vi.fn(async () => ''),
    setClipboardText: vi.fn(async () => false),
    noReplyLimit: -1,
    openURL: vi.fn(),
    on: vi.fn((name: string, h: Handler) => {
      const set = handlers.get(name) ?? new Set<Handler>();
      set.add(h);
      handlers.set(name, set);
      return () => set.delete(h);
    }),
    onFileDrop: vi.fn(() => () => {}),
  };
  return fake as unknown as typeof Engine;
}

/** model is a loaded model's Status.model with fields overridden. */
export function model(over: Partial<Model> = {}): Model {
  return {
    name: 'Tiny Llama',
    path: '/models/tiny.gguf',
    arch: 'llama',
    backend: 'cpu',
    ctx: 4096,
    ctxTrain: 32768,
    kv: 'q4',
    kvLabel: 'q4 KV (rotated)',
    slots: 2,
    template: 'llama3',
    memoryBytes: 1 << 30,
    demo: false,
    ...over,
  };
}

/** settings are saved Settings (the Go side's defaults) with fields overridden. */
export function settings(over: Partial<Settings> = {}): Settings {
  return {
    version: 1,
    lastModel: '',
    contextTokens: 4096,
    kvType: 'auto',
    sampling: { temperature: 0.8, topP: 0.95, topK: 40, minP: 0.05, repeatPenalty: 1 },
    systemPrompt: '',
    theme: 'system',
    startAtLogin: false,
    hotkey: '',
    server: { enabled: false, address: '127.0.0.1:11435' },
    slots: 2,
    threads: 0,
    quickActions: [],
    memoryLimit: 0,
    modelFiles: [],
    remoteEndpoints: [],
    activeRemote: '',
    documentMaxBytes: 16 * 2 ** 20,
    whenContextDoesNotFit: 'refuse',
    maxReplyTokens: 2048,
    ...over,
  };
}

const GiB = 2 ** 30;

/** estimate is an Estimate with fields overridden. */
export function estimate(over: Partial<Estimate> = {}): Estimate {
  return {
    ctx: 4096,
    kv: 'q4',
    weights: 4 * GiB,
    active: 0,
    experts: 0,
    expertsUsed: 0,
    activeApprox: false,
    kvBytes: 1 * GiB,
    scratch: 0.5 * GiB,
    overhead: 0.5 * GiB,
    total: 6 * GiB,
    budget: 8 * GiB,
    verdict: 'fits',
    maxCtx: 16384,
    ctxTrain: 32768,
    limits: [
      { kv: 'q4', maxCtx: 16384, bytes: GiB },
      { kv: 'q8', maxCtx: 8192, bytes: 2 * GiB },
      { kv: 'f16', maxCtx: 4096, bytes: 4 * GiB },
    ],
    advice: [],
    budgetSource: 'available memory',
    approx: false,
    tokPerSec: 0,
    ...over,
  };
}

/** deferred is a promise with its resolve and reject at hand. */
export function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** must is v, or a failed test when it is missing. */
export function must<T>(v: T | null | undefined, what = 'the element'): T {
  if (v === null || v === undefined) throw new Error(`${what} is missing`);
  return v;
}
