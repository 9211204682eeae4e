// The conversation: its turns, the draft being typed, the reply streaming.

import * as engine from '../engine';
import type { Delta, Final, Message, Progress, Role } from '../types';

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
}

type Pending = { kind: 'delta'; data: Delta } | { kind: 'progress'; data: Progress } | { kind: 'final'; data: Final };

class Chat {
  turns = $state<Turn[]>([]);
  draft = $state('');
  /** Why the last Send failed to start, else null. */
  error = $state<string | null>(null);

  #key = 0;
  // Events can beat Send's answer: hold them until the id is known.
  #early = new Map<string, Pending[]>();

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

  async submit(): Promise<void> {
    const text = this.draft.trim();
    if (text === '' || this.streaming) return;
    this.error = null;
    this.draft = '';
    this.turns.push({ key: ++this.#key, role: 'user', content: text, state: 'done', deltas: 0 });
    const messages = this.#history();
    this.turns.push({ key: ++this.#key, role: 'assistant', content: '', state: 'waiting', deltas: 0 });
    const reply = this.turns[this.turns.length - 1];
    if (!reply) return;
    try {
      const { replyId: id } = await engine.send(messages);
      reply.id = id;
      for (const p of this.#early.get(id) ?? []) this.#apply(p);
      this.#early.delete(id);
    } catch (e) {
      reply.state = 'error';
      reply.error = e instanceof Error ? e.message : String(e);
    }
  }

  async stop(): Promise<void> {
    const id = this.streaming?.id;
    if (id) await engine.stop(id);
  }

  #apply(p: Pending): void {
    const turn = this.turns.find((t) => t.id === p.data.id);
    if (!turn) {
      const list = this.#early.get(p.data.id) ?? [];
      list.push(p);
      this.#early.set(p.data.id, list);
      return;
    }
    switch (p.kind) {
      case 'delta':
        turn.content += p.data.text;
        turn.deltas++;
        turn.state = 'streaming';
        break;
      case 'progress':
        turn.prefill = { done: p.data.prefilled, total: p.data.promptTokens };
        break;
      case 'final':
        turn.final = p.data;
        turn.prefill = undefined;
        if (p.data.finishReason === 'cancelled') turn.state = 'stopped';
        else if (p.data.finishReason === 'error') {
          turn.state = 'error';
          turn.error = p.data.error ?? 'the engine failed';
        } else turn.state = 'done';
        break;
    }
  }
}

export const chat = new Chat();
