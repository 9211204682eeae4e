#!/usr/bin/env python3
"""Reference logits for the tiny Phi-3 test models (engine/families_test.go).

Reads each GGUF that `go test ./engine -run TestPhi3MatchesTransformers
-phi3-write DIR` wrote into DIR (with DIR/<model>.prompts.json, the prompts'
token ids from Nibble's tokenizer), loads its very weights into transformers'
Phi3ForCausalLM (float32, eager attention, TF32 off) and writes, per prompt,
<model>.ref/<prompt>.json (token ids, top-10 logits, 24 greedy ids, each a
full re-forward without cache) and <prompt>.last_logits.f32 (raw float32
logits of the last prompt position) under OUTDIR.

usage: python3 phi3_reference.py DIR OUTDIR   (needs torch, transformers, numpy)
"""
import inspect
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import Phi3Config, Phi3ForCausalLM

GREEDY_STEPS = 24


def read_gguf(path):
    """A minimal GGUF v3 reader: metadata and F32/F16 tensors as numpy."""
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t in scalar:
            return take(scalar[t])
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError(f"gguf value type {t}")

    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    assert version == 3
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    align = kv.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    tensors = {}
    for name, dims, typ, off in infos:
        n = int(np.prod(dims))
        dt = {0: np.float32, 1: np.float16}[typ]
        a = np.frombuffer(data, dtype=dt, count=n, offset=start + off).astype(np.float32)
        tensors[name] = a.reshape(list(reversed(dims)))  # ne[0] is the last (contiguous) axis
    return kv, tensors


def build(kv, tensors):
    a = "phi3."
    embd, heads = kv[a + "embedding_length"], kv[a + "attention.head_count"]
    hd = embd // heads
    orig = kv.get(a + "rope.scaling.original_context_length", kv[a + "context_length"])
    base = float(kv[a + "rope.freq_base"])
    rope = {"rope_type": "default", "rope_theta": base}
    long_f = tensors.get("rope_factors_long.weight")
    short_f = tensors.get("rope_factors_short.weight")
    if long_f is not None:
        rope = {"rope_type": "longrope", "rope_theta": base, "long_factor": long_f.tolist(),
                "short_factor": short_f.tolist(), "original_max_position_embeddings": orig}
    cfg = dict(vocab_size=tensors["token_embd.weight"].shape[0], hidden_size=embd,
               intermediate_size=kv[a + "feed_forward_length"], num_hidden_layers=kv[a + "block_count"],
               num_attention_heads=heads, num_key_value_heads=kv[a + "attention.head_count_kv"],
               max_position_embeddings=kv[a + "context_length"], original_max_position_embeddings=orig,
               rms_norm_eps=kv[a + "attention.layer_norm_rms_epsilon"], tie_word_embeddings=False,
               sliding_window=None, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0,
               pad_token_id=None, bos_token_id=1, eos_token_id=2)
    params = inspect.signature(Phi3Config.__init__).parameters
    if "rope_parameters" in params:
        cfg["rope_parameters"] = rope
    else:  # transformers 4.x
        cfg["rope_theta"] = base
        if rope["rope_type"] == "longrope":
            cfg["rope_scaling"] = {"type": "longrope", "long_factor": rope["long_factor"], "short_factor": rope["short_factor"]}
    config = Phi3Config(**cfg)
    config._attn_implementation = "eager"
    model = Phi3ForCausalLM(config).float()
    state = {"model.embed_tokens.weight": tensors["token_embd.weight"], "model.norm.weight": tensors["output_norm.weight"],
             "lm_head.weight": tensors["output.weight"]}
    for i in range(config.num_hidden_layers):
        p, q = f"blk.{i}.", f"model.layers.{i}."
        state[q + "input_layernorm.weight"] = tensors[p + "attn_norm.weight"]
        state[q + "self_attn.qkv_proj.weight"] = tensors[p + "attn_qkv.weight"]
        state[q + "self_attn.o_proj.weight"] = tensors[p + "attn_output.weight"]
        state[q + "post_attention_layernorm.weight"] = tensors[p + "ffn_norm.weight"]
        state[q + "mlp.gate_up_proj.weight"] = tensors[p + "ffn_up.weight"]
        state[q + "mlp.down_proj.weight"] = tensors[p + "ffn_down.weight"]
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, strict=True)
    expect = dict(hd=hd, base=base, orig=orig, long=long_f, short=short_f,
                  attn_factor=kv.get(a + "rope.scaling.attn_factor", 1.0))
    return model.cuda().eval(), expect


def expected_cos(expect, positions):
    """cos of NeoX RoPE as the GGUF describes it, float64: what HF must use."""
    hd = expect["hd"]
    inv = expect["base"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    n = int(positions.max()) + 1
    if expect["long"] is not None:
        inv = inv / (expect["long"] if n > expect["orig"] else expect["short"]).astype(np.float64)
    ang = positions[:, None].astype(np.float64) * inv[None, :]
    return np.concatenate([np.cos(ang), np.cos(ang)], axis=1) * expect["attn_factor"]


def main(src, out):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    for fn in sorted(os.listdir(src)):
        if not fn.endswith(".gguf"):
            continue
        name = fn[:-5]
        kv, tensors = read_gguf(os.path.join(src, fn))
        model, expect = build(kv, tensors)
        captured = {}
        model.model.rotary_emb.register_forward_hook(lambda m, i, o: captured.update(cos=o[0]))
        prompts = json.load(open(os.path.join(src, name + ".prompts.json")))
        os.makedirs(os.path.join(out, name + ".ref"), exist_ok=True)

        def forward(ids):
            with torch.no_grad():
                return model(torch.tensor([ids], device="cuda")).logits[0].float()

        for which, p in prompts.items():
            ids = p["token_ids"]
            logits = forward(ids)
            last = logits[-1].cpu().numpy().astype("<f4")
            got = captured["cos"][0].double().cpu().numpy()
            rope_err = float(np.abs(got - expected_cos(expect, np.arange(len(ids)))).max())
            greedy, seq = [], list(ids)
            for _ in range(GREEDY_STEPS):
                nxt = int(torch.argmax(forward(seq)[-1]))
                greedy.append(nxt)
                seq.append(nxt)
            top = np.argsort(-last, kind="stable")[:10]
            srt = np.sort(last)[::-1]
            ref = {"model": fn, **{k: v for k, v in p.items() if k != "token_ids"}, "add_bos": True,
                   "vocab": "ggml-vocab-phi-3.gguf", "n_prompt": len(ids), "token_ids": ids, "n_vocab": int(last.size),
                   "greedy_ids": greedy, "top_logits": [[int(i), float(last[i])] for i in top],
                   "generator": f"transformers {transformers.__version__} float32 eager",
                   "generator_detail": f"transformers {transformers.__version__} Phi3ForCausalLM float32 eager "
                                       f"(torch {torch.__version__}, {torch.cuda.get_device_name()}, TF32 off)",
                   "notes": f"token_ids from Nibble's tokenizer (phi-3 vocab); weights read from {fn} "
                            f"(nibble synth, see engine/families_test.go phi3Options); rope {model.config.rope_parameters if hasattr(model.config, 'rope_parameters') else ''}; "
                            f"max |HF cos - GGUF-derived cos| {rope_err:.2e}; top-1 gap {float(srt[0] - srt[1]):.4f}"}
            with open(os.path.join(out, name + ".ref", which + ".json"), "w") as f:
                json.dump(ref, f, indent=1)
            last.tofile(os.path.join(out, name + ".ref", which + ".last_logits.f32"))
            print(f"{name} {which}: n={len(ids)} rope cos err {rope_err:.2e} top1 gap {float(srt[0]-srt[1]):.4f} greedy {greedy[:8]}...", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
