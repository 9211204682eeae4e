#!/usr/bin/env python3
"""An independent check of the fixtures: a float64 numpy forward pass that
reads only each GGUF (its keys and tensors, interpreted the way llama.cpp's
graphs for these architectures do: src/models/qwen3moe.cpp, llama.cpp with
experts, openai-moe-iswa.cpp, gemma4-iswa.cpp) and compares the last-position
logits with transformers' references.

usage: python3 check_gguf.py [DIR]        (numpy only; DIR defaults to this folder)
"""
import json
import math
import os
import struct
import sys

import numpy as np

ALIGN = 32
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def read_gguf(path):
    data = open(path, "rb").read()
    pos = 4

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        r = data[pos:pos + n].decode()
        pos += n
        return r
    sc = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t in sc:
            return take(sc[t])
        if t == 8:
            return string()
        et, n = take("I"), take("Q")
        return [value(et) for _ in range(n)]
    assert data[:4] == b"GGUF"
    _, nt, nkv = take("I"), take("Q"), take("Q")
    kv = {}
    for _ in range(nkv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(nt):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        infos.append((name, ne, take("I"), take("Q")))
    start = (pos + ALIGN - 1) // ALIGN * ALIGN
    ts = {}
    for name, ne, gt, off in infos:
        n = int(np.prod(ne))
        shape = list(reversed(ne))
        if gt in (0, 1):
            dt = np.float32 if gt == 0 else np.float16
            ts[name] = np.frombuffer(data, dt, n, start + off).astype(np.float64).reshape(shape)
        elif gt == 39:  # MXFP4, ggml's block_mxfp4: e8m0 byte, then qs[j] = x[j] | x[j+16] << 4
            raw = np.frombuffer(data, np.uint8, n // 32 * 17, start + off).reshape(-1, 17)
            d = np.ldexp(1.0, raw[:, 0].astype(np.int64) - 127)
            x = np.empty((raw.shape[0], 32))
            x[:, :16] = E2M1[raw[:, 1:] & 15] * d[:, None]
            x[:, 16:] = E2M1[raw[:, 1:] >> 4] * d[:, None]
            ts[name] = x.reshape(shape)
        else:
            raise ValueError(f"{name}: ggml type {gt}")
    return kv, ts


def rms(x, w=None, eps=1e-6):
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * w if w is not None else y


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + np.exp(-x))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rope(x, n_rot, base, neox, freq_factors=None, yarn=None):
    """x [T, H, D]; ggml_rope_ext on the first n_rot dims of each head."""
    T = x.shape[0]
    half = n_rot // 2
    i = np.arange(half)
    theta_scale = base ** (-2.0 * i / n_rot)
    if freq_factors is not None:
        theta_scale = theta_scale / freq_factors[:half]
    pos = np.arange(T)[:, None]
    theta = pos * theta_scale[None, :]
    mscale = 1.0
    if yarn is not None:  # ggml rope_yarn with ext_factor 1
        factor, orig, bf, bs = yarn
        def corr(b):
            return n_rot * math.log(orig / (b * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = max(0, math.floor(corr(bf))), min(n_rot - 1, math.ceil(corr(bs)))
        ramp = 1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)
        interp = theta / factor
        theta = interp * (1 - ramp) + theta * ramp
        mscale = 1 + 0.1 * math.log(factor)
    c, s = np.cos(theta)[:, None, :] * mscale, np.sin(theta)[:, None, :] * mscale
    y = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        y[..., :half] = a * c - b * s
        y[..., half:n_rot] = b * c + a * s
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        y[..., 0:n_rot:2] = a * c - b * s
        y[..., 1:n_rot:2] = b * c + a * s
    return y


def attention(q, k, v, scale, window=0, sinks=None):
    """q [T, nh, d], k/v [T, nkv, d]; causal, optional sliding window and sinks."""
    T, nh, _ = q.shape
    g = nh // k.shape[1]
    out = np.zeros((T, nh, v.shape[2]))
    pq = np.arange(T)[:, None]
    pk = np.arange(T)[None, :]
    mask = pk > pq
    if window:
        mask |= (pq - pk) >= window
    for h in range(nh):
        s = q[:, h] @ k[:, h // g].T * scale
        s[mask] = -np.inf
        if sinks is not None:
            m = np.maximum(s.max(-1, keepdims=True), sinks[h])
            e = np.exp(s - m)
            p = e / (e.sum(-1, keepdims=True) + np.exp(sinks[h] - m))
        else:
            p = softmax(s)
        out[:, h] = p @ v[:, h // g]
    return out


def moe(x, logits, k, experts, weights_of, out_scale=None):
    """Adds up the chosen experts' outputs for every row of x."""
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        top = np.argsort(-logits[t], kind="stable")[:k]
        w = weights_of(logits[t], top)
        for e, we in zip(top, w):
            y = experts(e, x[t])
            if out_scale is not None:
                y = y * out_scale[e]
            out[t] += we * y
    return out


def forward(kv, ts, ids):
    arch = kv["general.architecture"]
    K = lambda k, d=None: kv.get(f"{arch}.{k}", d)
    L, H, nh = K("block_count"), K("embedding_length"), K("attention.head_count")
    nkv = K("attention.head_count_kv")
    eps = K("attention.layer_norm_rms_epsilon")
    W = lambda n: ts[n]
    x = W("token_embd.weight")[ids]
    T = len(ids)
    if arch == "gemma4":
        return forward_gemma4(kv, ts, ids, K, L, H, nh, nkv, eps)
    hd = K("attention.key_length", H // nh)
    base = K("rope.freq_base")
    yarn = None
    if K("rope.scaling.type") == "yarn":
        yarn = (K("rope.scaling.factor"), K("rope.scaling.original_context_length"),
                K("rope.scaling.yarn_beta_fast", 32.0), K("rope.scaling.yarn_beta_slow", 1.0))
    n_exp_used = K("expert_used_count")
    for il in range(L):
        b = f"blk.{il}."
        h = rms(x, W(b + "attn_norm.weight"), eps)
        def proj(name, n):
            y = h @ W(b + name + ".weight").T
            if b + name + ".bias" in ts:
                y = y + W(b + name + ".bias")
            return y.reshape(T, n, hd)
        q, k, v = proj("attn_q", nh), proj("attn_k", nkv), proj("attn_v", nkv)
        if b + "attn_q_norm.weight" in ts:
            q = rms(q, W(b + "attn_q_norm.weight"), eps)
            k = rms(k, W(b + "attn_k_norm.weight"), eps)
        neox = arch != "llama"
        q, k = rope(q, hd, base, neox, yarn=yarn), rope(k, hd, base, neox, yarn=yarn)
        window = K("attention.sliding_window", 0) if (arch == "gpt-oss" and il % 2 == 0) else 0
        sinks = ts.get(b + "attn_sinks.weight")
        a = attention(q, k, v, 1 / math.sqrt(hd), window, sinks).reshape(T, nh * hd)
        a = a @ W(b + "attn_output.weight").T
        if b + "attn_output.bias" in ts:
            a = a + W(b + "attn_output.bias")
        x = x + a
        if arch == "gpt-oss":
            h = rms(x, W(b + "post_attention_norm.weight"), eps)
            logits = h @ W(b + "ffn_gate_inp.weight").T + W(b + "ffn_gate_inp.bias")
            G, U, D = W(b + "ffn_gate_exps.weight"), W(b + "ffn_up_exps.weight"), W(b + "ffn_down_exps.weight")
            gb, ub, db = W(b + "ffn_gate_exps.bias"), W(b + "ffn_up_exps.bias"), W(b + "ffn_down_exps.bias")
            def expert(e, r):
                gt = np.minimum(G[e] @ r + gb[e], 7.0)
                up = np.clip(U[e] @ r + ub[e], -7.0, 7.0)
                return D[e] @ ((up + 1) * gt / (1 + np.exp(-1.702 * gt))) + db[e]
            x = x + moe(h, logits, n_exp_used, expert, lambda lg, top: softmax(lg[top]))
        else:
            h = rms(x, W(b + "ffn_norm.weight"), eps)
            logits = h @ W(b + "ffn_gate_inp.weight").T
            G, U, D = W(b + "ffn_gate_exps.weight"), W(b + "ffn_up_exps.weight"), W(b + "ffn_down_exps.weight")
            expert = lambda e, r: D[e] @ (silu(G[e] @ r) * (U[e] @ r))
            def renorm(lg, top):
                p = softmax(lg)[top]
                return p / p.sum()
            x = x + moe(h, logits, n_exp_used, expert, renorm)
    x = rms(x, W("output_norm.weight"), eps)
    return x @ ts.get("output.weight", ts["token_embd.weight"]).T


def forward_gemma4(kv, ts, ids, K, L, H, nh, nkv, eps):
    W = lambda n: ts[n]
    T = len(ids)
    swa = K("attention.sliding_window_pattern")
    hd_g, hd_s = K("attention.key_length"), K("attention.key_length_swa")
    rot_g, rot_s = K("rope.dimension_count"), K("rope.dimension_count_swa")
    base_g, base_s = K("rope.freq_base"), K("rope.freq_base_swa")
    window = K("attention.sliding_window")
    n_kv_from = L - K("attention.shared_kv_layers", 0)
    P = K("embedding_length_per_layer_input", 0)
    nkv_of = (lambda il: nkv[il]) if isinstance(nkv, list) else (lambda il: nkv)
    x = W("token_embd.weight")[ids] * math.sqrt(H)
    ple = None
    if P:
        tok = W("per_layer_token_embd.weight")[ids].reshape(T, L, P) * math.sqrt(P)
        pr = (x @ W("per_layer_model_proj.weight").T / math.sqrt(H)).reshape(T, L, P)
        pr = rms(pr, W("per_layer_proj_norm.weight"), eps)
        ple = (pr + tok) / math.sqrt(2)
    cache = {}
    for il in range(L):
        b = f"blk.{il}."
        s = swa[il]
        hd = hd_s if s else hd_g
        ff = None if s else W("rope_freqs.weight")
        rot, base = (rot_s, base_s) if s else (rot_g, base_g)
        h = rms(x, W(b + "attn_norm.weight"), eps)
        q = rms((h @ W(b + "attn_q.weight").T).reshape(T, nh, hd), W(b + "attn_q_norm.weight"), eps)
        q = rope(q, rot, base, True, ff)
        if il < n_kv_from:
            kr = (h @ W(b + "attn_k.weight").T).reshape(T, nkv_of(il), hd)
            vr = (h @ W(b + "attn_v.weight").T).reshape(T, nkv_of(il), hd) if b + "attn_v.weight" in ts else kr
            k = rope(rms(kr, W(b + "attn_k_norm.weight"), eps), rot, base, True, ff)
            v = rms(vr, None, eps)
            cache[s] = (k, v)
        else:
            k, v = cache[s]
        a = attention(q, k, v, 1.0, window if s else 0).reshape(T, nh * hd) @ W(b + "attn_output.weight").T
        attn_out = x + rms(a, W(b + "post_attention_norm.weight"), eps)
        hf = rms(attn_out, W(b + "ffn_norm.weight"), eps)
        cur = (gelu(hf @ W(b + "ffn_gate.weight").T) * (hf @ W(b + "ffn_up.weight").T)) @ W(b + "ffn_down.weight").T
        if b + "ffn_gate_inp.weight" in ts:
            cur = rms(cur, W(b + "post_ffw_norm_1.weight"), eps)
            xm = rms(attn_out, W(b + "pre_ffw_norm_2.weight"), eps)
            tmp = rms(attn_out, None, eps) / math.sqrt(H) * W(b + "ffn_gate_inp.scale")
            logits = tmp @ W(b + "ffn_gate_inp.weight").T
            GU, D = W(b + "ffn_gate_up_exps.weight"), W(b + "ffn_down_exps.weight")
            nff = GU.shape[1] // 2
            def expert(e, r):
                gu = GU[e] @ r
                return D[e] @ (gelu(gu[:nff]) * gu[nff:])
            def renorm(lg, top):
                p = softmax(lg)[top]
                return p / p.sum()
            cm = moe(xm, logits, K("expert_used_count"), expert, renorm, W(b + "ffn_down_exps.scale"))
            cur = cur + rms(cm, W(b + "post_ffw_norm_2.weight"), eps)
        cur = attn_out + rms(cur, W(b + "post_ffw_norm.weight"), eps)
        if ple is not None:
            g = gelu(cur @ W(b + "inp_gate.weight").T) * ple[:, il]
            cur = cur + rms(g @ W(b + "proj.weight").T, W(b + "post_norm.weight"), eps)
        x = cur * W(b + "layer_output_scale.weight")
    x = rms(x, W("output_norm.weight"), eps)
    lg = x @ W("token_embd.weight").T
    cap = K("final_logit_softcapping")
    return cap * np.tanh(lg / cap) if cap else lg


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    ok = True
    for name in sorted(f[:-5] for f in os.listdir(d) if f.endswith(".gguf")):
        kv, ts = read_gguf(os.path.join(d, name + ".gguf"))
        for which in ("short", "long"):
            ref = json.load(open(os.path.join(d, name + ".ref", which + ".json")))
            want = np.fromfile(os.path.join(d, name + ".ref", which + ".last_logits.f32"), "<f4").astype(np.float64)
            got = forward(kv, ts, ref["token_ids"])[-1]
            cos = got @ want / np.linalg.norm(got) / np.linalg.norm(want)
            top = set(np.argsort(-got)[:10]) == {i for i, _ in ref["top_logits"]}
            line_ok = cos >= 0.99999 and top and int(np.argmax(got)) == ref["greedy_ids"][0]
            ok &= line_ok
            print(f"{name:16s} {which:5s} cos {cos:.10f} max|d| {np.abs(got - want).max():.2e} top-10 {top} "
                  f"greedy[0] {int(np.argmax(got)) == ref['greedy_ids'][0]} {'ok' if line_ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
