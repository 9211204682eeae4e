import { fireEvent, render, screen } from '@testing-library/svelte';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as engine from '../engine';
import { model, must } from '../../test/fakeEngine';
import { engineStatus } from '../stores/engineStatus.svelte';
import { remote } from '../stores/remote.svelte';
import type { RemoteEndpoint, Status } from '../types';
import Conversation from './Conversation.svelte';
import Header from './Header.svelte';
import RemoteModels from './RemoteModels.svelte';

vi.mock('../engine', async () => (await import('../../test/fakeEngine')).fakeEngine());

const endpoint = (over: Partial<RemoteEndpoint>): RemoteEndpoint => ({
  name: 'lab',
  url: 'http://10.0.0.5:8000/v1',
  model: 'qwen2.5-72b',
  contextTokens: 32768,
  hasKey: true,
  active: false,
  ...over,
});

const remoteModel = (over: Partial<NonNullable<Status['remote']>> = {}) =>
  model({ name: 'lab', path: 'remote:lab', backend: 'remote', remote: true, host: '10.0.0.5:8000', remoteModel: 'qwen2.5-72b', ctx: 32768, ...over });

beforeEach(() => {
  vi.clearAllMocks();
  remote.endpoints = [];
  remote.models = [];
  remote.error = null;
  remote.formError = null;
  remote.busy = null;
  engineStatus.status = { state: 'ready', busy: false, running: 0, model: model() };
});

const row = (name: string): HTMLElement => must(document.querySelector(`[data-testid="remote-endpoint"][data-name="${name}"]`) as HTMLElement, `endpoint ${name}`);

describe('remote endpoints', () => {
  it('lists the endpoints without their keys and marks the one in use', async () => {
    vi.mocked(engine.remoteEndpoints).mockResolvedValue([endpoint({}), endpoint({ name: 'ollama', url: 'http://127.0.0.1:11434/v1', model: '', contextTokens: 0, hasKey: false, active: true })]);
    render(RemoteModels);
    await vi.waitFor(() => expect(screen.getAllByTestId('remote-endpoint')).toHaveLength(2));
    expect(row('lab').dataset.active).toBe('false');
    expect(row('lab').textContent).toContain('qwen2.5-72b');
    expect(row('lab').textContent).toContain('32K context');
    expect(row('lab').textContent).toContain('API key set');
    expect(row('ollama').dataset.active).toBe('true');
    expect(row('ollama').textContent).toContain("the server's default model");
    expect(row('ollama').textContent).toContain('no key');
    expect(row('ollama').querySelector('[data-testid="remote-use-local"]')).not.toBeNull();
  });

  it('Use makes it the model chats go to; a refusal shows in red with the message', async () => {
    vi.mocked(engine.remoteEndpoints).mockResolvedValue([endpoint({})]);
    render(RemoteModels);
    await vi.waitFor(() => row('lab'));
    vi.mocked(engine.useRemote).mockRejectedValueOnce(new Error('remote model "lab": http://10.0.0.5:8000/v1: listing models: the server cannot be reached: connection refused'));
    await fireEvent.click(must(row('lab').querySelector('[data-testid="remote-use"]') as HTMLElement));
    const err = await screen.findByTestId('remote-error');
    expect(err.textContent).toContain('cannot be reached');
    expect(err.getAttribute('role')).toBe('alert');
    expect(engineStatus.status.remote).toBeUndefined();

    const used: Status = { state: 'ready', busy: false, running: 0, model: model(), remote: remoteModel() };
    vi.mocked(engine.useRemote).mockResolvedValueOnce(used);
    vi.mocked(engine.remoteEndpoints).mockResolvedValue([endpoint({ active: true })]);
    await fireEvent.click(must(row('lab').querySelector('[data-testid="remote-use"]') as HTMLElement));
    await vi.waitFor(() => expect(row('lab').dataset.active).toBe('true'));
    expect(engine.useRemote).toHaveBeenLastCalledWith('lab');
    expect(engineStatus.status.remote?.name).toBe('lab');
    expect(screen.queryByTestId('remote-error')).toBeNull();

    vi.mocked(engine.useRemote).mockResolvedValueOnce({ ...used, remote: undefined });
    vi.mocked(engine.remoteEndpoints).mockResolvedValue([endpoint({})]);
    await fireEvent.click(must(row('lab').querySelector('[data-testid="remote-use-local"]') as HTMLElement));
    await vi.waitFor(() => expect(row('lab').dataset.active).toBe('false'));
    expect(engine.useRemote).toHaveBeenLastCalledWith('');
  });

  it('adds an endpoint: Connect lists the models and takes the context, Add saves it with the key', async () => {
    render(RemoteModels);
    await fireEvent.click(screen.getByTestId('remote-add'));
    await fireEvent.input(screen.getByTestId('remote-name'), { target: { value: ' lab ' } });
    await fireEvent.input(screen.getByTestId('remote-url'), { target: { value: 'http://10.0.0.5:8000/v1' } });
    await fireEvent.input(screen.getByTestId('remote-key'), { target: { value: 'sk-1' } });
    vi.mocked(engine.remoteModels).mockResolvedValueOnce([
      { id: 'small', contextTokens: 0 },
      { id: 'qwen2.5-72b', contextTokens: 32768 },
    ]);
    await fireEvent.click(screen.getByTestId('remote-connect'));
    await vi.waitFor(() => expect(screen.getAllByRole('option')).toHaveLength(2));
    expect(engine.remoteModels).toHaveBeenCalledWith({ name: 'lab', url: 'http://10.0.0.5:8000/v1', key: 'sk-1', model: '', contextTokens: 0 });
    const select = screen.getByTestId('remote-model') as HTMLSelectElement;
    expect(select.value).toBe('small');
    await fireEvent.change(select, { target: { value: 'qwen2.5-72b' } });
    expect((screen.getByTestId('remote-context') as HTMLInputElement).value).toBe('32768');

    vi.mocked(engine.saveRemoteEndpoint).mockRejectedValueOnce(new Error('remote endpoints[0].name: "lab" is also the name of remoteEndpoints[1]'));
    await fireEvent.click(screen.getByTestId('remote-save'));
    expect((await screen.findByTestId('remote-form-error')).textContent).toContain('also the name');
    expect(screen.getByTestId('remote-form')).toBeTruthy();

    vi.mocked(engine.saveRemoteEndpoint).mockResolvedValueOnce([endpoint({})]);
    await fireEvent.click(screen.getByTestId('remote-save'));
    await vi.waitFor(() => expect(screen.queryByTestId('remote-form')).toBeNull());
    expect(engine.saveRemoteEndpoint).toHaveBeenLastCalledWith({ name: 'lab', url: 'http://10.0.0.5:8000/v1', key: 'sk-1', model: 'qwen2.5-72b', contextTokens: 32768 });
    expect(row('lab')).toBeTruthy();
  });

  it('a server that cannot be reached or speaks another protocol: the message in red', async () => {
    render(RemoteModels);
    await fireEvent.click(screen.getByTestId('remote-add'));
    expect((screen.getByTestId('remote-connect') as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.input(screen.getByTestId('remote-url'), { target: { value: 'http://127.0.0.1:9' } });
    vi.mocked(engine.remoteModels).mockRejectedValueOnce(new Error('http://127.0.0.1:9/v1: listing models: the answer is not an OpenAI-compatible models list (not JSON)'));
    await fireEvent.click(screen.getByTestId('remote-connect'));
    const err = await screen.findByTestId('remote-form-error');
    expect(err.textContent).toContain('not an OpenAI-compatible models list');
    expect(err.classList.contains('error-text')).toBe(true);
    expect((screen.getByTestId('remote-save') as HTMLButtonElement).disabled).toBe(true); // no name yet
  });

  it('Remove forgets the endpoint', async () => {
    vi.mocked(engine.remoteEndpoints).mockResolvedValue([endpoint({})]);
    vi.mocked(engine.removeRemoteEndpoint).mockResolvedValueOnce([]);
    vi.mocked(engine.status).mockResolvedValueOnce({ state: 'ready', busy: false, running: 0, model: model() });
    render(RemoteModels);
    await vi.waitFor(() => row('lab'));
    await fireEvent.click(must(row('lab').querySelector('[data-testid="remote-remove"]') as HTMLElement));
    await vi.waitFor(() => expect(screen.queryAllByTestId('remote-endpoint')).toHaveLength(0));
    expect(engine.removeRemoteEndpoint).toHaveBeenCalledWith('lab');
  });
});

describe('a remote model in use', () => {
  it('the header names it, as remote, with its host; the demo note goes', () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, model: model({ demo: true }), remote: remoteModel() };
    render(Header);
    expect(screen.getByTestId('model-name').textContent).toContain('lab');
    expect(screen.getByTestId('remote-badge')).toBeTruthy();
    expect(screen.getByTestId('remote-meta').textContent).toBe('lab · remote · 10.0.0.5:8000 · qwen2.5-72b · 32K context');
    expect(screen.queryByTestId('demo-badge')).toBeNull();
    expect(screen.queryByTestId('demo-note')).toBeNull();
    expect(engineStatus.ready).toBe(true);
  });

  it('is ready with no local model, and the empty chat says where replies come from', () => {
    engineStatus.status = { state: 'ready', busy: false, running: 0, remote: remoteModel() };
    expect(engineStatus.ready).toBe(true);
    render(Conversation);
    expect(screen.getByTestId('remote-note').textContent).toBe('Replies come from lab at 10.0.0.5:8000.');
  });
});
