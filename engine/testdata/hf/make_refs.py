#!/usr/bin/env python3
"""Tiny random-weight Hugging Face models of the MoE / gpt-oss / Gemma 4
families, their GGUFs and transformers' float32 reference outputs.

usage: python3 make_refs.py VOCAB_JSON OUTDIR        (torch, transformers, numpy)

VOCAB_JSON comes from `go test ./engine -run TestHFWriteVocab -hf-vocab DIR`:
the fixtures' vocabulary and the prompts' token ids from Nibble's tokenizer.

For each model this script
  1. draws every weight from numpy's default_rng(seed) in the order of the
     model's state_dict; matrices are rounded to float16 (the GGUF stores
     F16) and gpt-oss's expert matrices are drawn as MXFP4 (random e2m1 codes
     and e8m0 block scales), so the GGUF and transformers hold identical
     values;
  2. builds the transformers model (float32, eager attention, eager experts,
     TF32 off) on those weights and computes, per prompt, the last-position
     logits of one forward over the whole prompt without cache, their top 10,
     and 24 greedy tokens (each step a full forward over prompt + generated,
     no EOS stop);
  3. measures the margins that decide whether an engine with an f16 KV cache
     can reproduce them: the gap between the k-th and (k+1)-th router logit at
     every position and layer, the greedy top-1 leads and the top-10/11 gap,
     each divided by twice the largest change that rounding K and V to
     float16 causes (a stand-in for an f16 cache); of several seeds it keeps
     the one with the largest worst margin;
  4. writes the GGUF the way llama.cpp's convert_hf_to_gguf.py writes these
     architectures (keys, tensor names, F32 for norms / 1-D / biases /
     routers, Q/K permutation for the llama arch, MXFP4 repacking of gpt-oss
     `_blocks`/`_scales`, Gemma 4 rope_freqs), reads it back and checks every
     tensor against the transformers weights.
"""
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import transformers

GREEDY_STEPS = 24
SEEDS = list(range(11, 51))
# Of the seeds whose worst margin ratio reaches MIN_RATIO, the one whose greedy
# runs repeat least (random models like to fall into a repeated token, which
# would test decoding weakly); the search stops at GOOD_RATIO and GOOD_DISTINCT.
MIN_RATIO, GOOD_RATIO, GOOD_DISTINCT = 3.0, 6.0, 12
DEV = "cuda" if torch.cuda.is_available() else "cpu"

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")

# ---------------------------------------------------------------- GGUF writer

GGML_F32, GGML_F16, GGML_MXFP4 = 0, 1, 39
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
ALIGN = 32


class Gguf:
    """A minimal GGUF v3 writer (the subset gguf-py's GGUFWriter uses here)."""

    def __init__(self, arch, name):
        self.kv = []
        self.tensors = []  # (name, ne, type, bytes)
        self.arch = arch
        self.str("general.architecture", arch)
        self.str("general.name", name)

    def _add(self, key, vtype, value):
        assert key not in [k for k, _, _ in self.kv], key
        self.kv.append((key, vtype, value))

    def u32(self, key, v): self._add(key, T_U32, int(v))
    def f32(self, key, v): self._add(key, T_F32, float(v))
    def bool(self, key, v): self._add(key, T_BOOL, bool(v))
    def str(self, key, v): self._add(key, T_STR, v)
    def arr(self, key, etype, vs): self._add(key, T_ARR, (etype, list(vs)))
    def a(self, key, v): return self.kv_arch(key, v)

    def kv_arch(self, key, v, t=T_U32):
        k = f"{self.arch}.{key}"
        if isinstance(v, list):
            et = T_BOOL if isinstance(v[0], bool) else T_I32
            self.arr(k, et, v)
        elif t == T_F32:
            self.f32(k, v)
        elif t == T_STR:
            self.str(k, v)
        else:
            self.u32(k, v)

    def tensor(self, name, array, gtype=None):
        """array: float numpy array in numpy order; F32 or F16 by gtype."""
        a = np.asarray(array)
        if gtype is None:
            gtype = GGML_F32
        if gtype == GGML_F32:
            data = a.astype("<f4").tobytes()
        elif gtype == GGML_F16:
            h = a.astype("<f2")
            assert np.array_equal(h.astype(np.float32), a.astype(np.float32)), f"{name}: not F16-exact"
            data = h.tobytes()
        else:
            raise ValueError(gtype)
        self.tensors.append((name, list(reversed(a.shape)), gtype, data))

    def raw_mxfp4(self, name, blocks17, n_cols):
        """blocks17: uint8 [.., rows, n_cols/32*17]."""
        shape = list(blocks17.shape[:-1])
        assert blocks17.shape[-1] == n_cols // 32 * 17
        self.tensors.append((name, [n_cols] + list(reversed(shape)), GGML_MXFP4, blocks17.tobytes()))

    def write(self, path):
        out = bytearray()

        def s(x):
            b = x.encode("utf-8")
            out.extend(struct.pack("<Q", len(b)))
            out.extend(b)

        def val(t, v):
            if t == T_U32:
                out.extend(struct.pack("<I", v))
            elif t == T_I32:
                out.extend(struct.pack("<i", v))
            elif t == T_F32:
                out.extend(struct.pack("<f", v))
            elif t == T_BOOL:
                out.extend(struct.pack("<B", 1 if v else 0))
            elif t == T_STR:
                s(v)
            elif t == T_ARR:
                et, vs = v
                out.extend(struct.pack("<IQ", et, len(vs)))
                for x in vs:
                    val(et, x)
            else:
                raise ValueError(t)

        out.extend(b"GGUF")
        out.extend(struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for k, t, v in self.kv:
            s(k)
            out.extend(struct.pack("<I", t))
            val(t, v)
        off = 0
        offsets = []
        for name, ne, gt, data in self.tensors:
            s(name)
            out.extend(struct.pack("<I", len(ne)))
            for d in ne:
                out.extend(struct.pack("<Q", d))
            out.extend(struct.pack("<IQ", gt, off))
            offsets.append(off)
            off += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        out.extend(b"\0" * ((-len(out)) % ALIGN))
        for (name, ne, gt, data), o in zip(self.tensors, offsets):
            out.extend(data)
            out.extend(b"\0" * ((-len(data)) % ALIGN))
        with open(path, "wb") as f:
            f.write(out)
        return len(out)


def read_gguf(path):
    """Reads back metadata and tensors (F32, F16, MXFP4 decoded to float32)."""
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
    version, nt, nkv = take("I"), take("Q"), take("Q")
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
        if gt in (GGML_F32, GGML_F16):
            dt = np.float32 if gt == GGML_F32 else np.float16
            ts[name] = np.frombuffer(data, dt, n, start + off).astype(np.float32).reshape(shape)
        elif gt == GGML_MXFP4:
            nb = n // 32
            raw = np.frombuffer(data, np.uint8, nb * 17, start + off).reshape(nb, 17)
            ts[name] = ggml_mxfp4_decode(raw).reshape(shape)
        else:
            raise ValueError(gt)
    return kv, ts


# ------------------------------------------------------------------ MXFP4

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def hf_mxfp4_dequant(blocks, scales):
    """transformers' convert_moe_packed_tensors: byte j of a 16-byte block holds
    element 2j in its low nibble and 2j+1 in its high nibble; the value is
    e2m1 * 2^(scale - 127). blocks [.., rows, nb, 16] -> [.., rows, nb*32]."""
    lo = E2M1[blocks & 0x0F]
    hi = E2M1[blocks >> 4]
    out = np.empty(blocks.shape[:-1] + (32,), np.float32)
    out[..., 0::2] = lo
    out[..., 1::2] = hi
    out = out * np.ldexp(np.float32(1), scales.astype(np.int32) - 127)[..., None].astype(np.float32)
    return out.reshape(blocks.shape[:-2] + (blocks.shape[-2] * 32,))


def converter_nibble_layout(blocks):
    """llama.cpp's GptOssModel.transform_nibble_layout, in numpy: from the HF
    order (2j, 2j+1) per byte to ggml's (j, j+16)."""
    t = ((blocks & 0x0F) << 4) | (blocks >> 4)
    a, b = t[..., :8], t[..., 8:]
    a0 = a & 0xF0
    a1 = (a << 4) & 0xF0
    a_ = np.stack((a0, a1), axis=-1).reshape(t.shape)
    b0 = b >> 4
    b1 = b & 0x0F
    b_ = np.stack((b0, b1), axis=-1).reshape(t.shape)
    out = a_ | b_
    return (((out & 0xF0) >> 4) | ((out & 0x0F) << 4)).astype(np.uint8)


def converter_repack_mxfp4(blocks, scales):
    """llama.cpp's repack_mxfp4: per block the e8m0 scale byte, then the 16
    code bytes in ggml order; rows of n_blocks*17 bytes."""
    q = converter_nibble_layout(blocks)
    d = np.concatenate((scales[..., None], q), axis=-1)
    return d.reshape(d.shape[:-2] + (d.shape[-2] * 17,)).astype(np.uint8)


def ggml_mxfp4_decode(raw):
    """ggml's dequantize_row_mxfp4: qs[j] low nibble = element j, high = j+16;
    x = kvalues_mxfp4[q] * E8M0_TO_FP32_HALF(e), kvalues = 2 * e2m1."""
    e = raw[:, 0].astype(np.int32)
    half = np.where(e < 2, np.ldexp(np.float32(1), e - 128), np.ldexp(np.float32(1), e - 128)).astype(np.float32)
    kv = (2 * E2M1).astype(np.float32)
    qs = raw[:, 1:]
    out = np.empty((raw.shape[0], 32), np.float32)
    out[:, :16] = kv[qs & 0x0F] * half[:, None]
    out[:, 16:] = kv[qs >> 4] * half[:, None]
    return out


# ------------------------------------------------------------------ weights

def f16(a):
    return a.astype(np.float16).astype(np.float32)


def draw_weights(model, rng, spec, mxfp4=None):
    """Fills every state_dict entry (in its order) from rng; returns the numpy
    values, the same ones now in the model."""
    vals = {}
    sd = model.state_dict()
    tied = spec.get("tied", False)
    for name, t in sd.items():
        if tied and name == "lm_head.weight":
            continue
        shape = tuple(t.shape)
        n = name.split(".")
        leaf = n[-1]
        if mxfp4 is not None and name in mxfp4:
            v = mxfp4[name]
        elif "embed_tokens" in name:
            v = f16(spec["embd_std"] * rng.standard_normal(shape, dtype=np.float32))
        elif leaf == "layer_scalar":
            v = rng.uniform(0.6, 1.4, shape).astype(np.float32)
        elif leaf == "per_expert_scale":
            v = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        elif name.endswith("router.scale"):
            v = (1.0 + 0.2 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
        elif leaf == "sinks":
            v = rng.standard_normal(shape, dtype=np.float32)
        elif "bias" in leaf:
            v = (0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
        elif len(shape) == 1:  # norms
            mean = next((m for sfx, m in spec.get("norm_mean", {}).items() if name.endswith(sfx)), 1.0)
            v = (mean * (1 + 0.1 * rng.standard_normal(shape, dtype=np.float32))).astype(np.float32)
        elif spec["router"] and name.endswith(spec["router"]):
            v = (rng.standard_normal(shape, dtype=np.float32) / math.sqrt(shape[-1])).astype(np.float32)
        else:
            fan_in = shape[-1]
            gain = next((m for sfx, m in spec.get("std_scale", {}).items() if name.endswith(sfx)), 1.0)
            v = f16(gain * rng.standard_normal(shape, dtype=np.float32) / math.sqrt(fan_in))
        assert v.shape == shape, (name, v.shape, shape)
        vals[name] = v
        with torch.no_grad():
            t.copy_(torch.from_numpy(np.ascontiguousarray(v)))
    same = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert same == tied, f"lm_head tied: {same}, want {tied}"
    return vals


def gptoss_mxfp4(cfg, rng):
    """Expert matrices as HF's `_blocks`/`_scales` plus their float values."""
    E, H, I = cfg.num_local_experts, cfg.hidden_size, cfg.intermediate_size
    raw = {}
    floats = {}
    for il in range(cfg.num_hidden_layers):
        gb = rng.integers(0, 256, (E, 2 * I, H // 32, 16), dtype=np.uint8)
        gs = rng.integers(120, 126, (E, 2 * I, H // 32), dtype=np.uint8)
        db = rng.integers(0, 256, (E, H, I // 32, 16), dtype=np.uint8)
        ds = rng.integers(119, 124, (E, H, I // 32), dtype=np.uint8)
        raw[il] = (gb, gs, db, ds)
        p = f"model.layers.{il}.mlp.experts."
        # the dequantisation transformers itself applies to checkpoints' _blocks/_scales
        from transformers.integrations.mxfp4 import convert_moe_packed_tensors
        for bl, sc, ours in ((gb, gs, hf_mxfp4_dequant(gb, gs)), (db, ds, hf_mxfp4_dequant(db, ds))):
            theirs = convert_moe_packed_tensors(torch.from_numpy(bl), torch.from_numpy(sc), dtype=torch.float32).numpy()
            assert np.array_equal(theirs, ours.transpose(0, 2, 1)), "MXFP4 dequantisation differs from transformers'"
        floats[p + "gate_up_proj"] = np.ascontiguousarray(hf_mxfp4_dequant(gb, gs).transpose(0, 2, 1))  # [E, H, 2I]
        floats[p + "down_proj"] = np.ascontiguousarray(hf_mxfp4_dequant(db, ds).transpose(0, 2, 1))  # [E, I, H]
    return raw, floats


# ------------------------------------------------------------------ models

def build(cls, cfg):
    m = cls._from_config(cfg, attn_implementation="eager", experts_implementation="eager", dtype=torch.float32)
    m = m.to(DEV).eval()
    assert m.config._attn_implementation == "eager", m.config._attn_implementation
    ei = getattr(m.config, "_experts_implementation", None)
    return m, ei


# Keep attention a modest part of the residual stream and its scores moderate
# (Gemma 4 scales scores by 1.0): an f16 KV cache then moves logits and router
# logits far less than their gaps, so the references' greedy tokens, top 10 and
# expert choices are robust; attention still moves the logits well beyond
# the 0.99999 cosine bar.
GEMMA_ATTN_NORMS = {"post_attention_layernorm.weight": 0.15, "q_norm.weight": 0.5, "k_norm.weight": 0.5}


def family_specs():
    from transformers import (Gemma4ForCausalLM, Gemma4TextConfig, GptOssConfig, GptOssForCausalLM,
                              MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)
    V = 2048
    specs = []
    specs.append(dict(
        name="tiny-qwen3moe", arch="qwen3moe", cls=Qwen3MoeForCausalLM, bos=False,
        router="mlp.gate.weight", embd_std=0.8, top_k=4, std_scale={"o_proj.weight": 0.15},
        cfg=lambda: Qwen3MoeConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                   max_position_embeddings=2048, rms_norm_eps=1e-6,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                                   num_experts=16, num_experts_per_tok=4, moe_intermediate_size=32,
                                   norm_topk_prob=True, tie_word_embeddings=False, decoder_sparse_step=1),
    ))
    specs.append(dict(
        name="tiny-mixtral", arch="llama", cls=MixtralForCausalLM, bos=False,
        router="mlp.gate.weight", embd_std=0.8, top_k=2, std_scale={"o_proj.weight": 0.15},
        cfg=lambda: MixtralConfig(vocab_size=V, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                                  rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                                  num_local_experts=8, num_experts_per_tok=2, sliding_window=None,
                                  tie_word_embeddings=False),
    ))
    specs.append(dict(
        name="tiny-gptoss", arch="gpt-oss", cls=GptOssForCausalLM, bos=False,
        router="mlp.router.weight", embd_std=0.8, top_k=4, std_scale={"o_proj.weight": 0.15},
        cfg=lambda: GptOssConfig(vocab_size=V, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=32, sliding_window=32,
                                 max_position_embeddings=131072, rms_norm_eps=1e-5,
                                 layer_types=["sliding_attention", "full_attention"],
                                 rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                                                  "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True,
                                                  "original_max_position_embeddings": 4096},
                                 num_local_experts=16, num_experts_per_tok=4, attention_bias=True,
                                 tie_word_embeddings=False),
    ))
    specs.append(dict(
        name="tiny-gemma4", arch="gemma4", cls=Gemma4ForCausalLM, bos=True, tied=True,
        router=None, embd_std=0.08, top_k=0, norm_mean=GEMMA_ATTN_NORMS,
        cfg=lambda: Gemma4TextConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                                     num_attention_heads=2, num_key_value_heads=1, head_dim=32, global_head_dim=64,
                                     layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                                  "sliding_attention", "sliding_attention", "full_attention"],
                                     sliding_window=32, max_position_embeddings=8192, rms_norm_eps=1e-6,
                                     final_logit_softcapping=30.0, vocab_size_per_layer_input=V,
                                     hidden_size_per_layer_input=16, num_kv_shared_layers=2,
                                     attention_k_eq_v=False, enable_moe_block=False, tie_word_embeddings=True,
                                     pad_token_id=None, bos_token_id=None, eos_token_id=None),
    ))
    specs.append(dict(
        name="tiny-gemma4-moe", arch="gemma4", cls=Gemma4ForCausalLM, bos=True, tied=True,
        router="router.proj.weight", embd_std=0.08, top_k=2, norm_mean=GEMMA_ATTN_NORMS,
        cfg=lambda: Gemma4TextConfig(vocab_size=V, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
                                     num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
                                     num_global_key_value_heads=1, attention_k_eq_v=True,
                                     layer_types=["sliding_attention", "full_attention",
                                                  "sliding_attention", "full_attention"],
                                     sliding_window=32, max_position_embeddings=8192, rms_norm_eps=1e-6,
                                     final_logit_softcapping=30.0, hidden_size_per_layer_input=0,
                                     num_kv_shared_layers=0, enable_moe_block=True, num_experts=8, top_k_experts=2,
                                     moe_intermediate_size=32, tie_word_embeddings=True,
                                     pad_token_id=None, bos_token_id=None, eos_token_id=None),
    ))
    return specs


# ------------------------------------------------------------ references

@torch.no_grad()
def logits_of(model, ids):
    out = model(input_ids=torch.tensor([ids], device=DEV), use_cache=False)
    return out.logits[0].float().cpu().numpy()


def router_modules(model):
    return [(n, m) for n, m in model.named_modules() if type(m).__name__.endswith("Router")]


@torch.no_grad()
def analyse(model, ids, top_k):
    """Exact and f16-K/V-rounded forwards over ids: logits and router logits."""
    captured = []
    hooks = []
    for n, m in router_modules(model):
        def hook(mod, inp, out, n=n):
            r = out[0].float()
            if type(mod).__name__ == "Gemma4TextRouter":  # probabilities; log keeps the gaps of the logits
                r = torch.log(r)
            captured.append((n, r.reshape(-1, r.shape[-1]).cpu().numpy()))
        hooks.append(m.register_forward_hook(hook))
    exact = logits_of(model, ids)
    r_exact = captured[:]
    captured.clear()
    rounders = []
    for n, m in model.named_modules():
        if n.endswith("self_attn.k_proj") or n.endswith("self_attn.v_proj"):
            rounders.append(m.register_forward_hook(lambda mod, i, o: o.half().float()))
    pert = logits_of(model, ids)
    r_pert = captured[:]
    for h in hooks + rounders:
        h.remove()
    res = {"exact": exact, "pert": pert}
    if top_k:
        gaps, deltas = [], []
        for (n, a), (_, b) in zip(r_exact, r_pert):
            s = -np.sort(-a, axis=-1)
            gaps.append(s[:, top_k - 1] - s[:, top_k])
            deltas.append(np.abs(a - b).max())
        res["router_gap_min"] = float(min(g.min() for g in gaps))
        res["router_delta"] = float(max(deltas))
        res["router_layers"] = len(r_exact)
    return res


def reference(model, ids, top_k):
    seq = list(ids)
    greedy = []
    last = None
    for step in range(GREEDY_STEPS):
        lg = logits_of(model, seq)[-1]
        if step == 0:
            last = lg.copy()
        tok = int(np.argmax(lg))
        greedy.append(tok)
        seq.append(tok)
    full = seq[:-1]  # prompt + the 23 tokens fed back
    an = analyse(model, full, top_k)
    n = len(ids)
    ex, pe = an["exact"], an["pert"]
    pos = range(n - 1, n - 1 + GREEDY_STEPS)
    margins = []
    for p in pos:
        s = np.sort(ex[p])[::-1]
        margins.append(float(s[0] - s[1]))
    consistent = [int(np.argmax(ex[p])) for p in pos] == greedy
    dl = float(np.abs(ex[list(pos)] - pe[list(pos)]).max())
    s = np.sort(last)[::-1]
    top_gap = float(s[9] - s[10])
    order = np.argsort(-last, kind="stable")[:10]
    r = {
        "last": last, "greedy": greedy, "top": [[int(i), float(last[i])] for i in order],
        "greedy_margin_min": min(margins), "top10_gap": top_gap, "logit_delta": dl,
        "cos_pert_last": float(np.dot(ex[n - 1], pe[n - 1]) / np.linalg.norm(ex[n - 1]) / np.linalg.norm(pe[n - 1])),
        "greedy_distinct": len(set(greedy)), "teacher_forced_consistent": consistent,
    }
    ratios = [min(margins) / (2 * dl + 1e-30), top_gap / (2 * dl + 1e-30)]
    if top_k:
        r.update({k: an[k] for k in ("router_gap_min", "router_delta", "router_layers")})
        ratios.append(an["router_gap_min"] / (2 * an["router_delta"] + 1e-30))
    r["worst_ratio"] = float(min(ratios)) if consistent else 0.0
    return r


# ------------------------------------------------------------------- GGUF

def add_vocab(g, voc, spec):
    g.str("tokenizer.ggml.model", voc["model"])
    g.str("tokenizer.ggml.pre", voc["pre"])
    g.arr("tokenizer.ggml.tokens", T_STR, voc["tokens"])
    g.arr("tokenizer.ggml.token_type", T_I32, voc["token_type"])
    g.arr("tokenizer.ggml.merges", T_STR, voc["merges"])
    tid = {t: i for i, t in enumerate(voc["tokens"])}
    bos, eos, pad = {
        "qwen3moe": ("<|endoftext|>", "<|im_end|>", "<|endoftext|>"),
        "llama": ("<|endoftext|>", "<|endoftext|>", "<|endoftext|>"),
        "gpt-oss": ("<|startoftext|>", "<|return|>", "<|endoftext|>"),
        "gemma4": ("<bos>", "<eos>", "<pad>"),
    }[spec["arch"]]
    g.u32("tokenizer.ggml.bos_token_id", tid[bos])
    g.u32("tokenizer.ggml.eos_token_id", tid[eos])
    g.u32("tokenizer.ggml.padding_token_id", tid[pad])
    g.bool("tokenizer.ggml.add_bos_token", spec["bos"])


def llama_permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute (rotate-half -> interleaved pairs)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hp(cfg, attr):
    """A config value; Gemma 4's per-layer ones from its first sliding layer."""
    if getattr(cfg, "model_type", "") == "gemma4_text":
        return getattr(cfg.per_layer_config[cfg.layer_types.index("sliding_attention")], attr)
    return getattr(cfg, attr)


def write_gguf(spec, cfg, vals, voc, path, mx_raw=None):
    """Returns {gguf tensor name: expected float32 values} for the read-back check."""
    arch = spec["arch"]
    g = Gguf(arch, spec["name"])
    expect = {}
    L = cfg.num_hidden_layers

    def w(name, v, gtype=None):
        if gtype is None:
            nd = v.ndim
            if nd <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight") or ".ffn_gate_inp." in name:
                gtype = GGML_F32
            else:
                gtype = GGML_F16
        g.tensor(name, v, gtype)
        expect[name] = v.astype(np.float32)

    A = g.kv_arch
    # keys common to TextModel.set_gguf_parameters
    A("block_count", L)
    A("context_length", cfg.max_position_embeddings)
    A("embedding_length", cfg.hidden_size)
    A("feed_forward_length", cfg.intermediate_size)
    A("attention.head_count", cfg.num_attention_heads)
    A("attention.head_count_kv", hp(cfg, "num_key_value_heads"))
    rp = cfg.rope_parameters
    if arch == "gemma4":
        A("rope.freq_base", rp["full_attention"]["rope_theta"], T_F32)
        A("rope.freq_base_swa", rp["sliding_attention"]["rope_theta"], T_F32)
    else:
        if rp.get("rope_type") == "yarn":
            A("rope.scaling.type", "yarn", T_STR)
            A("rope.scaling.factor", rp["factor"], T_F32)
            A("rope.scaling.original_context_length", rp["original_max_position_embeddings"])
            A("rope.scaling.yarn_beta_fast", rp["beta_fast"], T_F32)
            A("rope.scaling.yarn_beta_slow", rp["beta_slow"], T_F32)
        A("rope.freq_base", rp["rope_theta"], T_F32)
    A("attention.layer_norm_rms_epsilon", cfg.rms_norm_eps, T_F32)
    if arch in ("qwen3moe", "gpt-oss"):
        A("expert_count", cfg.num_experts)
        A("expert_used_count", cfg.num_experts_per_tok)
        A("attention.key_length", hp(cfg, "head_dim"))
        A("attention.value_length", hp(cfg, "head_dim"))
    if arch == "llama":
        A("expert_count", cfg.num_local_experts)
        A("expert_used_count", cfg.num_experts_per_tok)
        A("vocab_size", cfg.vocab_size)
        A("rope.dimension_count", cfg.hidden_size // cfg.num_attention_heads)
    if arch == "qwen3moe":
        A("expert_feed_forward_length", cfg.moe_intermediate_size)
    if arch == "gpt-oss":
        A("attention.sliding_window", cfg.sliding_window)
        A("expert_feed_forward_length", cfg.intermediate_size)
    if arch == "gemma4":
        if cfg.enable_moe_block:
            A("expert_count", cfg.num_experts)
            A("expert_used_count", cfg.top_k_experts)
            A("expert_feed_forward_length", cfg.moe_intermediate_size)
        A("final_logit_softcapping", cfg.final_logit_softcapping, T_F32)
        A("attention.sliding_window", cfg.sliding_window)
        A("attention.shared_kv_layers", cfg.num_kv_shared_layers)
        A("embedding_length_per_layer_input", cfg.hidden_size_per_layer_input or 0)
        swa = [t == "sliding_attention" for t in cfg.layer_types]
        A("attention.sliding_window_pattern", swa)
        hd_full = spec["global_head_dim"]
        A("attention.key_length", hd_full)
        A("attention.value_length", hd_full)
        A("attention.key_length_swa", hp(cfg, "head_dim"))
        A("attention.value_length_swa", hp(cfg, "head_dim"))
        if spec.get("global_kv") is not None:
            g.kv = [kv for kv in g.kv if kv[0] != "gemma4.attention.head_count_kv"]
            A("attention.head_count_kv", [hp(cfg, "num_key_value_heads") if s else spec["global_kv"] for s in swa])
        A("rope.dimension_count", hd_full)
        A("rope.dimension_count_swa", hp(cfg, "head_dim"))
    g.u32("general.file_type", 1)
    g.u32("general.quantization_version", 2)
    add_vocab(g, voc, spec)

    v = vals
    p = "model."
    if arch == "gemma4":
        full = rp["full_attention"]
        n_rot = int(spec["global_head_dim"] * full["partial_rotary_factor"] / 2)
        n_unrot = spec["global_head_dim"] // 2 - n_rot
        w("rope_freqs.weight", np.array([1.0] * n_rot + [1e30] * n_unrot, np.float32))
    w("token_embd.weight", v[p + "embed_tokens.weight"])
    if arch == "gemma4" and cfg.hidden_size_per_layer_input:
        w("per_layer_token_embd.weight", v[p + "embed_tokens_per_layer.weight"])
        w("per_layer_model_proj.weight", v[p + "per_layer_model_projection.weight"])
        w("per_layer_proj_norm.weight", v[p + "per_layer_projection_norm.weight"])
    w("output_norm.weight", v[p + "norm.weight"])
    if not spec.get("tied"):
        w("output.weight", v["lm_head.weight"])
    nh, nkv = cfg.num_attention_heads, hp(cfg, "num_key_value_heads")
    for il in range(L):
        b = f"blk.{il}."
        q = f"{p}layers.{il}."
        sa = q + "self_attn."
        w(b + "attn_norm.weight", v[q + "input_layernorm.weight"])
        wq, wk = v[sa + "q_proj.weight"], v.get(sa + "k_proj.weight")
        if arch == "llama":
            wq = llama_permute(wq, nh, nh)
            wk = llama_permute(wk, nh, nkv)
        w(b + "attn_q.weight", wq)
        if wk is not None:
            w(b + "attn_k.weight", wk)
        if sa + "v_proj.weight" in v:
            w(b + "attn_v.weight", v[sa + "v_proj.weight"])
        w(b + "attn_output.weight", v[sa + "o_proj.weight"])
        if arch == "gpt-oss":
            for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
                w(b + gg + ".bias", v[sa + hf + ".bias"])
            w(b + "attn_sinks.weight", v[sa + "sinks"])
        if sa + "q_norm.weight" in v:
            w(b + "attn_q_norm.weight", v[sa + "q_norm.weight"])
        if sa + "k_norm.weight" in v:
            w(b + "attn_k_norm.weight", v[sa + "k_norm.weight"])
        if arch in ("qwen3moe", "llama"):
            w(b + "ffn_norm.weight", v[q + "post_attention_layernorm.weight"])
            e = q + "mlp.experts."
            I = cfg.moe_intermediate_size if arch == "qwen3moe" else cfg.intermediate_size
            gu = v[e + "gate_up_proj"]
            w(b + "ffn_gate_inp.weight", v[q + "mlp.gate.weight"])
            w(b + "ffn_gate_exps.weight", gu[:, :I, :])
            w(b + "ffn_up_exps.weight", gu[:, I:, :])
            w(b + "ffn_down_exps.weight", v[e + "down_proj"])
        if arch == "gpt-oss":
            w(b + "post_attention_norm.weight", v[q + "post_attention_layernorm.weight"])
            w(b + "ffn_gate_inp.weight", v[q + "mlp.router.weight"])
            w(b + "ffn_gate_inp.bias", v[q + "mlp.router.bias"])
            gb, gs, db, ds = mx_raw[il]
            I, H = cfg.intermediate_size, cfg.hidden_size
            e = q + "mlp.experts."
            gu = v[e + "gate_up_proj"].transpose(0, 2, 1)  # [E, 2I, H], rows interleaved gate/up
            for gname, rows in (("ffn_gate_exps.weight", slice(0, None, 2)), ("ffn_up_exps.weight", slice(1, None, 2))):
                g.raw_mxfp4(b + gname, converter_repack_mxfp4(gb[:, rows], gs[:, rows]), H)
                expect[b + gname] = np.ascontiguousarray(gu[:, rows, :])
            g.raw_mxfp4(b + "ffn_down_exps.weight", converter_repack_mxfp4(db, ds), I)
            expect[b + "ffn_down_exps.weight"] = np.ascontiguousarray(v[e + "down_proj"].transpose(0, 2, 1))
            gub = v[e + "gate_up_proj_bias"]
            w(b + "ffn_gate_exps.bias", gub[:, 0::2])
            w(b + "ffn_up_exps.bias", gub[:, 1::2])
            w(b + "ffn_down_exps.bias", v[e + "down_proj_bias"])
        if arch == "gemma4":
            w(b + "post_attention_norm.weight", v[q + "post_attention_layernorm.weight"])
            w(b + "ffn_norm.weight", v[q + "pre_feedforward_layernorm.weight"])
            w(b + "ffn_gate.weight", v[q + "mlp.gate_proj.weight"])
            w(b + "ffn_up.weight", v[q + "mlp.up_proj.weight"])
            w(b + "ffn_down.weight", v[q + "mlp.down_proj.weight"])
            w(b + "post_ffw_norm.weight", v[q + "post_feedforward_layernorm.weight"])
            if cfg.enable_moe_block:
                w(b + "ffn_gate_inp.weight", v[q + "router.proj.weight"])
                w(b + "ffn_gate_inp.scale", v[q + "router.scale"])
                w(b + "ffn_down_exps.scale", v[q + "router.per_expert_scale"])
                w(b + "ffn_gate_up_exps.weight", v[q + "experts.gate_up_proj"])
                w(b + "ffn_down_exps.weight", v[q + "experts.down_proj"])
                w(b + "pre_ffw_norm_2.weight", v[q + "pre_feedforward_layernorm_2.weight"])
                w(b + "post_ffw_norm_1.weight", v[q + "post_feedforward_layernorm_1.weight"])
                w(b + "post_ffw_norm_2.weight", v[q + "post_feedforward_layernorm_2.weight"])
            if cfg.hidden_size_per_layer_input:
                w(b + "inp_gate.weight", v[q + "per_layer_input_gate.weight"])
                w(b + "proj.weight", v[q + "per_layer_projection.weight"])
                w(b + "post_norm.weight", v[q + "post_per_layer_input_norm.weight"])
            w(b + "layer_output_scale.weight", v[q + "layer_scalar"])
    size = g.write(path)
    # read back: every tensor decodes to the values transformers used
    kv, ts = read_gguf(path)
    assert sorted(ts) == sorted(expect), (sorted(set(ts) ^ set(expect)))
    for name, want in expect.items():
        got = ts[name]
        assert got.shape == want.shape, (name, got.shape, want.shape)
        assert np.array_equal(got, want), f"{name}: read-back differs (max {np.abs(got - want).max()})"
    used = {k for k in vals if not (spec.get("tied") and k == "lm_head.weight")}
    return size, len(ts), used


# --------------------------------------------------------------------- main

def main():
    voc = json.load(open(sys.argv[1]))
    outdir = sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
    print("torch", torch.__version__, "transformers", transformers.__version__, "numpy", np.__version__, "device", DEV,
          torch.cuda.get_device_name(0) if DEV == "cuda" else "")
    summary = {}
    for spec in family_specs():
        if only and spec["name"] not in only:
            continue
        t0 = time.time()
        try:
            summary[spec["name"]] = run_family(spec, voc, outdir)
        except Exception as e:  # keep going: report and make the others
            import traceback
            traceback.print_exc()
            summary[spec["name"]] = {"error": repr(e)}
        print(f"== {spec['name']} done in {time.time() - t0:.1f}s", flush=True)
    json.dump(summary, open(os.path.join(outdir, "summary.json"), "w"), indent=1)
    print(json.dumps(summary, indent=1))


def run_family(spec, voc, outdir):
    cfg0 = spec["cfg"]()
    if spec["arch"] == "gemma4":
        spec["global_head_dim"] = cfg0.per_layer_config[cfg0.layer_types.index("full_attention")].head_dim
        spec["global_kv"] = 1 if cfg0.attention_k_eq_v else None
    prompts = voc["prompts"]
    key = "ids_bos" if spec["bos"] else "ids"
    best = None
    for seed in SEEDS:
        cfg = spec["cfg"]()
        model, ei = build(spec["cls"], cfg)
        rng = np.random.default_rng(seed)
        mx_raw = None
        mx_float = None
        if spec["arch"] == "gpt-oss":
            mx_raw, mx_float = gptoss_mxfp4(cfg, rng)
        vals = draw_weights(model, rng, spec, mx_float)
        clamp = None
        if spec["arch"] == "gpt-oss":
            clamp = install_clamp_counter(model)
        refs = {w: reference(model, prompts[w][key], spec["top_k"]) for w in ("short", "long")}
        worst = min(r["worst_ratio"] for r in refs.values())
        info = {w: {k: r[k] for k in r if k not in ("last", "greedy", "top")} for w, r in refs.items()}
        if clamp is not None:
            info["clamp"] = dict(clamp)
        print(f"{spec['name']} seed {seed}: worst margin ratio {worst:.1f} distinct greedy "
              f"{[r['greedy_distinct'] for r in refs.values()]} experts_impl {ei} {json.dumps(info)}", flush=True)
        distinct = min(r["greedy_distinct"] for r in refs.values())
        score = (worst >= MIN_RATIO, distinct if worst >= MIN_RATIO else 0, worst)
        if best is None or score > best[0]:
            best = (score, worst, seed, cfg, vals, refs, mx_raw, info, model)
        else:
            del model
        if worst >= GOOD_RATIO and distinct >= GOOD_DISTINCT:
            break
    _, worst, seed, cfg, vals, refs, mx_raw, info, model = best
    name = spec["name"]
    path = os.path.join(outdir, name + ".gguf")
    size, ntens, used = write_gguf(spec, cfg, vals, voc, path, mx_raw)
    refdir = os.path.join(outdir, name + ".ref")
    os.makedirs(refdir, exist_ok=True)
    for w, r in refs.items():
        ids = prompts[w][key]
        r["last"].astype("<f4").tofile(os.path.join(refdir, w + ".last_logits.f32"))
        doc = {
            "model": name, "prompt": prompts[w]["prompt"], "add_bos": spec["bos"], "n_prompt": len(ids),
            "token_ids": ids, "n_vocab": int(cfg.vocab_size), "greedy_ids": r["greedy"], "top_logits": r["top"],
            "seed": seed, "margins": info[w],
            "generator": f"make_refs.py, transformers {transformers.__version__}, torch {torch.__version__}, "
                         f"{type(model).__name__}, float32, eager attention and experts, TF32 off, "
                         f"{torch.cuda.get_device_name(0) if DEV == 'cuda' else 'cpu'}",
        }
        json.dump(doc, open(os.path.join(refdir, w + ".json"), "w"), indent=1)
    return {"seed": seed, "worst_ratio": worst, "gguf_bytes": size, "tensors": ntens, "info": info,
            "greedy": {w: r["greedy"] for w, r in refs.items()}}


def install_clamp_counter(model):
    """Counts how often gpt-oss's clamped SwiGLU clamps (gate > 7, |up| > 7)."""
    stats = {"gate_clamped": 0, "up_clamped": 0, "values": 0}
    for layer in model.model.layers:
        ex = layer.mlp.experts
        orig = ex._apply_gate

        def wrapped(gate_up, orig=orig, ex=ex):
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
            stats["gate_clamped"] += int((gate > ex.limit).sum())
            stats["up_clamped"] += int((up.abs() > ex.limit).sum())
            stats["values"] += int(gate.numel())
            return orig(gate_up)
        ex._apply_gate = wrapped
    return stats


if __name__ == "__main__":
    main()
