// The conversation: its turns, the draft being typed, the reply streaming,
// and the kept conversation (history) the turns belong to.

import * as engine from '../engine';
import type { ThinkingChoice } from '../engine';
import { message } from '../format';
import type { Conversation, Delta, DocumentUse, Final, FinishReason, Message, Progress, ReplyStats, Role, Source } from '../types';
import { documents } from './documents.svelte';

export type TurnState = 'waiting' | 'streaming' | 'done' | 'stopped' | 'error';

export interface Turn {
  key: number;
  role: Role;
  content: string;
  state: TurnState;
  /** How many streamed pieces the content came in. */
  deltas: number;
  /** The engine's reply id (assistant turns, once Send returned). */
  id?: string;
  error?: string;
  prefill?: { done: number; total: number };
  final?: Final;
  /** The numbered sources of an answer about documents, and what each document gave. */
  sources?: Source[];
  uses?: DocumentUse[];
  /** A reasoning model's thinking before the answer (content), streamed apart from it. */
  reasoning?: string;
  /** Only the answer is shown, not the thinking: a quick action's reply, an answer about documents. */
  answerOnly?: boolean;
  /** When the thinking began here (ms), and how long it took as seen here, until the final event says. */
  thinkStart?: number;
  thinkingMs?: number;
}

type Pending = { kind: 'delta'; data: Delta } | { kind: 'progress'; data: Progress } | { kind: 'final'; data: Final };

/** The prompt-error text for an empty prompt. */
export const emptyPromptError = 'Type a message first: the prompt is empty.';
/** The prompt-error text while an attached document is still being read (the question is kept). */
export const readingPromptError = 'A document is still being read: send your question when its chip says how it fits.';
/** The prompt-error text for a reply limit that is not a number of tokens. */
export const replyLimitError = 'The reply limit is a whole number of tokens: leave it empty for the Settings\' limit, or 0 for no limit.';

/**
 * replyLimit reads the chat's reply-limit field: "" is the settings'
 * limit (0 to send), "0" no limit, else a number of tokens; null when it
 * is none of these.
 */
export function replyLimit(text: string): number | null {
  const t = text.trim();
  if (t === '') return 0;
  if (!/^\d+$/.test(t)) return null;
  const n = Number(t);
  if (!Number.isSafeInteger(n)) return null;
  return n === 0 ? engine.noReplyLimit : n;
}

export class Chat {
  turns = $state<Turn[]>([]);
  draft = $state('');
  /** Why the last Send failed to start, else null. */
  error = $state<string | null>(null);
  /** What is wrong with the prompt (empty), shown by the prompt box. */
  promptError = $state<string | null>(null);
  /** The kept conversation the turns continue (0: a new one). */
  conversationId = $state(0);
  /** The conversation's title when restored from the history. */
  title = $state('');
  /** This chat's reply limit as typed (replyLimit reads it): "" is the settings' limit. */
  replyLimitText = $state('');
  /** This chat's reasoning switch, for a model whose template has one: "" thinks as the model does by default. */
  thinking = $state<ThinkingChoice>('');

  #key = 0;
  // Events can beat Send's answer: they are held until the id is known,
  // but only while a Send is in flight (else they belong to nobody, e.g.
  // the reply of a chat that New chat cleared).
  // eslint-disable-next-line svelte/prefer-svelte-reactivity -- held events are not shown
  #early = new Map<string, Pending[]>();
  #inflight = 0;
  // Bumped by New chat and restore, so a Send that returns afterwards does
  // not attach itself to the new conversation.
  #session = 0;
  // Stop was clicked before Send returned the reply's id.
  #stopAsked = false;

  get streaming(): Turn | undefined {
    return this.turns.find((t) => t.role === 'assistant' && (t.state === 'waiting' || t.state === 'streaming'));
  }

  connect(): () => void {
    const offs = [
      engine.on('chat:delta', (d) => this.#apply({ kind: 'delta', data: d })),
      engine.on('chat:progress', (p) => this.#apply({ kind: 'progress', data: p })),
      engine.on('chat:final', (f) => this.#apply({ kind: 'final', data: f })),
    ];
    return () => offs.forEach((off) => off());
  }

  /** history is what the model sees: finished turns, failed replies left out. */
  #history(): Message[] {
    return this.turns
      .filter((t) => t.state === 'done' || t.state === 'stopped' || (t.role === 'user' && t.state !== 'error'))
      .filter((t) => t.content !== '' || t.role === 'user')
      .map((t) => ({ role: t.role, content: t.content }));
  }

  /** setDraft is typing: it clears the prompt error. */
  setDraft(text: string): void {
    this.draft = text;
    if (text.trim() !== '') this.promptError = null;
  }

  /** setThinking sets this chat's reasoning switch (its later replies). */
  setThinking(choice: ThinkingChoice): void {
    this.thinking = choice;
  }

  /** setReplyLimit is typing in the reply-limit field: it clears the prompt error it may have caused. */
  setReplyLimit(text: string): void {
    this.replyLimitText = text;
    if (replyLimit(text) !== null && this.promptError === replyLimitError) this.promptError = null;
  }

  /** #ready says why a question cannot go now (and shows it), else clears the errors. */
  #ready(text: string): boolean {
    if (this.streaming) return false;
    if (text === '') {
      this.promptError = emptyPromptError;
      return false;
    }
    if (documents.reading) {
      this.promptError = readingPromptError;
      return false;
    }
    if (replyLimit(this.replyLimitText) === null) {
      this.promptError = replyLimitError;
      return false;
    }
    this.error = null;
    this.promptError = null;
    return true;
  }

  async submit(): Promise<void> {
    const text = this.draft.trim();
    if (!this.#ready(text)) return;
    this.draft = '';
    this.turns.push({ key: ++this.#key, role: 'user', content: text, state: 'done', deltas: 0 });
    await this.#reply(false);
  }

  /** #lastQuestion is the index of the last user turn (-1: none). */
  #lastQuestion(): number {
    for (let i = this.turns.length - 1; i >= 0; i--) if (this.turns[i]?.role === 'user') return i;
    return -1;
  }

  /** canRegenerate: the last exchange has ended, so its reply can be asked for again or its question edited. */
  get canRegenerate(): boolean {
    return !this.streaming && this.#lastQuestion() >= 0;
  }

  /** regenerate asks the last question again; the new reply replaces the old one, here and in the history. */
  async regenerate(): Promise<void> {
    const i = this.#lastQuestion();
    const question = this.turns[i];
    if (!question || !this.#ready(question.content)) return;
    this.turns = this.turns.slice(0, i + 1);
    await this.#reply(true);
  }

  /** editLast sends text in place of the last question; the old exchange gives way to the new one. */
  async editLast(text: string): Promise<void> {
    const edited = text.trim();
    const i = this.#lastQuestion();
    if (i < 0 || !this.#ready(edited)) return;
    this.turns = this.turns.slice(0, i);
    this.turns.push({ key: ++this.#key, role: 'user', content: edited, state: 'done', deltas: 0 });
    await this.#reply(true);
  }

  /** #reply asks for a reply to the turns so far (their last is the question); replaceLast: in place of the kept last exchange. */
  async #reply(replaceLast: boolean): Promise<void> {
    this.#stopAsked = false;
    const messages = this.#history();
    const docs = documents.ids;
    this.turns.push({ key: ++this.#key, role: 'assistant', content: '', state: 'waiting', deltas: 0, answerOnly: docs.length > 0 });
    // The proxy the store hands out, so changes below are seen.
    const reply = this.turns[this.turns.length - 1];
    if (!reply) return;
    const session = this.#session;
    this.#inflight++;
    try {
      const r = await engine.send(messages, replyLimit(this.replyLimitText) ?? 0, this.conversationId, docs, replaceLast, this.thinking);
      reply.id = r.replyId;
      if (r.sources?.length) reply.sources = r.sources;
      if (r.documents?.length) reply.uses = r.documents;
      if (session === this.#session && r.conversationId) this.conversationId = r.conversationId;
      for (const p of this.#early.get(r.replyId) ?? []) this.#apply(p);
      this.#early.delete(r.replyId);
      if (this.#stopAsked && (reply.state === 'waiting' || reply.state === 'streaming')) await engine.stop(r.replyId);
    } catch (e) {
      reply.state = 'error';
      reply.error = message(e);
    } finally {
      this.#inflight--;
      if (this.#inflight === 0) this.#early.clear();
    }
  }

  async stop(): Promise<void> {
    const turn = this.streaming;
    if (!turn) return;
    if (!turn.id) {
      this.#stopAsked = true;
      return;
    }
    try {
      await engine.stop(turn.id);
    } catch (e) {
      this.error = `Stop: ${message(e)}`;
    }
  }

  /**
   * startNew shows a reply that the Go side starts in a new conversation
   * of its own (a quick action): start returns its id, the user's turn as
   * sent, and the conversation's title. The chat on screen is replaced
   * only once it started; a refusal leaves it and is thrown.
   */
  async startNew(start: () => Promise<{ replyId: string; conversationId: number; prompt: string; name: string }>): Promise<void> {
    if (this.streaming) throw new Error('a reply is still running: wait for it, or stop it, first');
    this.#inflight++;
    try {
      const r = await start();
      const early = this.#early.get(r.replyId) ?? [];
      this.newChat();
      this.conversationId = r.conversationId;
      this.title = r.name;
      this.turns.push({ key: ++this.#key, role: 'user', content: r.prompt, state: 'done', deltas: 0 });
      this.turns.push({ key: ++this.#key, role: 'assistant', content: '', state: 'waiting', deltas: 0, id: r.replyId, answerOnly: true });
      for (const p of early) this.#apply(p);
    } finally {
      if (--this.#inflight === 0) this.#early.clear();
    }
  }

  /** newChat starts a fresh conversation; a reply still streaming is stopped. */
  newChat(): void {
    const live = this.streaming;
    if (live?.id) engine.stop(live.id).catch(() => {});
    this.#session++;
    documents.clear(); // documents belong to the conversation
    this.turns = [];
    this.conversationId = 0;
    this.title = '';
    this.replyLimitText = '';
    this.thinking = '';
    this.error = null;
    this.promptError = null;
    this.#early.clear();
  }

  /** restore shows a kept conversation, with the documents it kept; Send continues it. */
  restore(c: Conversation): void {
    this.newChat();
    documents.restore(c.documents ?? [], c.documentsNotKept ?? []);
    this.conversationId = c.id;
    this.title = c.title;
    this.turns = (c.messages ?? [])
      .filter((m) => m.role === 'user' || m.role === 'assistant')
      .map((m) => ({
        key: ++this.#key,
        role: m.role as Role,
        content: m.content,
        state: stateOf(m.stats),
        deltas: 0,
        final: m.stats ? finalOf(m.stats, m.content) : undefined,
        sources: m.sources?.length ? m.sources : undefined,
        reasoning: m.reasoning || undefined,
        answerOnly: (m.sources?.length ?? 0) > 0,
      }));
  }

  /** forget is told a kept conversation was deleted: Send starts a new one. */
  forget(id: number): void {
    if (this.conversationId === id) this.conversationId = 0;
  }

  #apply(p: Pending): void {
    const turn = this.turns.find((t) => t.id === p.data.id);
    if (!turn) {
      if (this.#inflight === 0) return;
      const list = this.#early.get(p.data.id) ?? [];
      list.push(p);
      this.#early.set(p.data.id, list);
      return;
    }
    if (turn.state !== 'waiting' && turn.state !== 'streaming') return; // ended already
    switch (p.kind) {
      case 'delta':
        if (p.data.reasoning && turn.thinkStart === undefined) turn.thinkStart = Date.now();
        if (p.data.text && turn.thinkStart !== undefined && turn.thinkingMs === undefined) turn.thinkingMs = Date.now() - turn.thinkStart;
        turn.content += p.data.text;
        if (p.data.reasoning) turn.reasoning = (turn.reasoning ?? '') + p.data.reasoning;
        turn.deltas++;
        turn.state = 'streaming';
        turn.prefill = undefined;
        break;
      case 'progress':
        turn.prefill = { done: p.data.prefilled, total: p.data.promptTokens };
        break;
      case 'final':
        turn.final = p.data;
        turn.prefill = undefined;
        // The final text is the whole reply: it mends a delta that was lost.
        if (p.data.text && p.data.text.length >= turn.content.length) turn.content = p.data.text;
        if (p.data.reasoning && p.data.reasoning.length >= (turn.reasoning?.length ?? 0)) turn.reasoning = p.data.reasoning;
        if (p.data.finishReason === 'cancelled') turn.state = 'stopped';
        else if (p.data.finishReason === 'error') {
          turn.state = 'error';
          turn.error = p.data.error || 'the engine failed';
        } else turn.state = 'done';
        break;
    }
  }
}

function stateOf(stats: ReplyStats | undefined): TurnState {
  if (!stats) return 'done';
  if (stats.finishReason === 'cancelled') return 'stopped';
  if (stats.finishReason === 'error') return 'error';
  return 'done';
}

function finalOf(s: ReplyStats, text: string): Final {
  return {
    id: '',
    finishReason: s.finishReason as FinishReason,
    text,
    promptTokens: s.promptTokens,
    reusedTokens: 0,
    genTokens: s.genTokens,
    ttftMs: s.ttftMs,
    thinkingMs: s.thinkingMs,
    prefillTokPerSec: s.prefillTokPerSec,
    decodeTokPerSec: s.decodeTokPerSec,
  };
}

export const chat = new Chat();
