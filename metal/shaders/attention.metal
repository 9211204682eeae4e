// Attention over the KV cache (docs/ARCHITECTURE.md, "Decode attention",
// "Prefill" and "KV cache format"):
//
//   kernel_attn_decode_<kv>  pass 1 of decode: grid (kv head × head chunk,
//                            split); one threadgroup reads the K/V codes of
//                            its split once for the hg query heads it serves
//                            and writes their unnormalized o, m and l.
//   kernel_attn_decode_mma_<kv>, kernel_attn_decode_mmah_<kv>
//                            pass 1 with simdgroup matrices (float or half
//                            operands), the same grid and outputs ("decode
//                            with the matrix units" below).
//   kernel_attn_merge_f32    pass 2: one threadgroup per query head merges
//                            its splits.
//   kernel_attn_stage_f32    prefill: the batch's new K (smoothed, rotated)
//                            and V rows rounded through f16, [kv head][row][D].
//   kernel_attn_prefill_<kv> causal prefill: grid (kv head × head chunk, row):
//                            the cached prefix from the cache, then the
//                            staged new rows 0..row, normalized.
//
// With a residual window (q8, q4), the positions from args.tail on of the
// range a threadgroup reads are taken from the plane's f16 ring (row
// position % ring_rows, attn_ring) after the older ones from their codes,
// continuing the same online softmax (attn_settle, then a plain query).
//
// <kv> is q4, q8 or f16. A threadgroup is ATTN_NSG simdgroups. Each
// simdgroup walks its own blocks of ATTN_BT = 64 tokens (blocks sg,
// sg+NSG, ... of the range): lane i scores tokens i and i+32 of the block
// for every query head (the qdot identity on packed codes: s·Σq'n + b·Σq';
// each query value read from threadgroup memory serves both tokens), one
// online-softmax update per block in the exp2 domain, then the simdgroup
// accumulates V, each lane owning 8 consecutive elements (one q4 word) of
// every head for one of the 256/D tokens a step covers (past D 256, two
// words of one token, and half as many heads a threadgroup). At the end the
// lanes' and then the simdgroups' (m, l, o) are merged.
//
// Shape choices were measured on an H200 with a hand CUDA port of the q4
// decode pass (D 128, gs 32, 8 kv heads, 128K positions, 256 threadgroups):
// 8 simdgroups of 2 tokens per lane read 1.3 TB/s at GQA 4 and 2.1 TB/s at
// GQA 1, against 0.9 and 1.0 TB/s for 4 simdgroups of one token per lane;
// lanes owning a whole word of V (rather than D/32 elements) brought that
// to 1.4 and 2.4 TB/s (D 64: 1.0 to 1.3). More splits (1024 or 4096
// threadgroups) did not help. GQA 8 stays near 0.65 TB/s: the score and V
// arithmetic (about 2·G·D per token) is the limit there, not the bandwidth.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

constant uint attn_d      [[function_constant(100)]]; // head dim: a multiple of 8 up to 256, of 16 up to 512
constant uint attn_gs     [[function_constant(101)]]; // metadata group (q4, q8): 32 or 64
constant uint attn_hg     [[function_constant(102)]]; // query heads per threadgroup: 1..ATTN_MAXH
constant bool attn_smooth [[function_constant(103)]]; // queries meet K as q∘λ
constant bool attn_rotate [[function_constant(104)]]; // queries are rotated like K
constant bool attn_scores [[function_constant(105)]]; // decode: export the raw scores
// Logit soft-capping (Gemma 2): c·log2(e) for a cap c, 0 for none. Each
// score s·log2(e) becomes c'·tanh(s·log2(e)/c') = log2(e)·c·tanh(s/c)
// before the mask and the softmax; the exported scores stay uncapped (as
// the CPU's). With 0 the test below is false at compile time: the kernels
// are those without the cap.
constant float attn_softcap [[function_constant(106)]];
// Attention sinks (gpt-oss): a learned logit per query head that joins the
// softmax denominator, as a key of that score with a zero value would:
// head h's l gains 2^(sink_h·log2(e) - m). Applied where each head's
// softmax is finished, the merge of decode (so every cache format gets it)
// and the end of prefill. False: the test is false at compile time and
// those kernels are the ones without sinks, bit for bit.
constant bool attn_sinks [[function_constant(107)]];

#define ATTN_NSG  8   // simdgroups per threadgroup
#define ATTN_TPL  2   // tokens per lane in a block: a simdgroup's block is ATTN_BT tokens
#define ATTN_BT   (32*ATTN_TPL)
#define ATTN_MAXH 8   // query heads per threadgroup
#define ATTN_MAXD 512 // head dim
#define ATTN_MAXG 16  // metadata groups a head (ATTN_MAXD/32)
#define ATTN_EV   8   // elements of a head a lane owns in V (one q4 word)
#define ATTN_LOG2E 1.4426950408889634f
// The "minus infinity" of the online softmax: finite, because Metal
// compiles with fast math, which assumes no infinities; 2^(ATTN_NEG - m)
// is still 0 and ATTN_NEG - ATTN_NEG is 0, so an empty state merges with
// weight 0 (next to a real one) or 1 (alone, with l = 0 and o = 0).
#define ATTN_NEG (-FLT_MAX/2)

// Macros, not program-scope constants computed from the function
// constants: those are evaluated for every dispatch of the library (in the
// emulator), where attn_gs may be unset and zero.
// Past 256 a lane takes attn_cpl = 2 words of a token in V (words li and
// attn_lpt + li), in the state's slots of heads attn_hg..2·attn_hg−1 (the
// encoder halves attn_hg there).
#define attn_cpl ((attn_d + 32*ATTN_EV - 1)/(32*ATTN_EV))
#define attn_lpt (attn_d/ATTN_EV/attn_cpl) // lanes per token in V
#define attn_tpi (32/attn_lpt)    // tokens per V step of a simdgroup (lanes from attn_tpi·attn_lpt on idle)
#define attn_lpt_pow2 ((attn_lpt & (attn_lpt - 1)) == 0)
#define attn_ng  (attn_d/attn_gs) // metadata groups per head

// The argument struct (setBytes at buffer(0)), one for every kernel here;
// the encoder (metal/encoder/attention.go) writes the same layout.
struct attn_args {
    uint  heads;        // query heads (rows of q and out are heads·D floats)
    uint  group;        // G: query heads per kv head
    uint  chunks;       // threadgroups per kv head along x (G/attn_hg)
    uint  ctx;          // slots per kv head in the cache planes (a sliding-
                        // window layer's ring: position % ctx)
    uint  lo;           // decode: first visible position; prefill: past
    uint  n;            // decode: end of the visible positions; prefill: rows
    uint  chunk;        // decode: tokens per split
    uint  splits;       // decode: splits per kv head
    uint  window;       // prefill: sliding window (0: none)
    uint  kv_heads;     // kv heads
    float qscale;       // scale·log2(e)
    float norm;         // rotation: 1/sqrt(D)
    uint  score_stride; // decode export: floats between query heads
    uint  tail;         // positions from tail on are read from the residual
                        // window's ring (decode: up to n; prefill: up to lo)
    uint  ring_rows;    // the ring's rows per kv head (the window W; 0: none)
    ulong ring;         // byte offset of the ring in a plane
};

// ---- query preparation ----

// attn_prepare_query writes the attn_hg query heads at q (D floats apart)
// as the cache's keys meet them, q' = R·(q∘λ)·scale·log2(e), into qs, and
// each metadata group's Σq' into qsum; for q4 (predivide) it then divides
// element i by 16^(i%8), so that a code masked in place from its 32-bit word
// (MLX's mask trick, widened from uint16 to uint32 words) multiplies it
// without a shift. Same operations in the same order as the CPU's
// prepareQuery and kv.Rotation.Apply: for D = P·m (P the largest power of
// two dividing D) the Walsh–Hadamard transform on each block of P, scaled
// by norm = 1/√P, then for m > 1 the blocks mixed by Q_m (signs + D,
// row-major) through scratch (attn_hg·D floats).
inline void attn_prepare_query(
        threadgroup float * qs, threadgroup float * qsum, threadgroup float * scratch,
        device const float * q, device const float * lambda, device const float * signs,
        float qscale, float norm, bool predivide, bool groups, uint tid, uint ntg) {
    for (uint j = 0; j < attn_hg; ++j) {
        for (uint e = tid; e < attn_d; e += ntg) {
            float x = q[j*attn_d + e];
            if (attn_smooth) {
                x *= lambda[e];
            }
            if (attn_rotate) {
                x *= signs[e];
            }
            qs[j*attn_d + e] = x;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint block = attn_d & (0u - attn_d); // P
    const bool mix = attn_rotate && block < attn_d;
    if (attn_rotate) {
        // The fast Walsh–Hadamard transform, stage by stage: a span h < P
        // pairs elements of one block.
        const uint half_d = attn_d/2;
        for (uint h = 1; h < block; h *= 2) {
            for (uint k = tid; k < attn_hg*half_d; k += ntg) {
                const uint j = k/half_d, r = k%half_d;
                const uint i = j*attn_d + (r/h)*2*h + r%h;
                const float a = qs[i], b = qs[i + h];
                qs[i] = a + b;
                qs[i + h] = a - b;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
    if (mix) {
        // Element jj of block b: Σ_n Q_m[b][n]·(element jj of block n)·norm.
        const uint m = attn_d/block;
        device const float * qm = signs + attn_d;
        for (uint k = tid; k < attn_hg*attn_d; k += ntg) {
            const uint j = k/attn_d, e = k%attn_d, b = e/block, jj = e%block;
            float acc = 0.0f;
            for (uint n = 0; n < m; ++n) {
                acc += qm[b*m + n]*(qs[j*attn_d + n*block + jj]*norm);
            }
            scratch[k] = acc;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint k = tid; k < attn_hg*attn_d; k += ntg) {
        float x = mix ? scratch[k] : qs[k];
        if (attn_rotate && !mix) {
            x *= norm;
        }
        qs[k] = x*qscale;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (groups) {
        for (uint k = tid; k < attn_hg*attn_ng; k += ntg) {
            threadgroup const float * x = qs + k*attn_gs; // head j = k/ng, group k%ng
            float s = 0.0f;
            for (uint i = 0; i < attn_gs; ++i) {
                s += x[i];
            }
            qsum[k] = s;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (predivide) {
        for (uint k = tid; k < attn_hg*attn_d; k += ntg) {
            qs[k] *= 1.0f/float(1u << (4*(k%8)));
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

// ---- the cache formats: one token's scores, and its V into a lane's elements ----

// A plane is codes (per (kv head, position) slot) and, for q4 and q8, the
// {scale, bias} half pairs of its groups.
struct attn_plane {
    device const char  * codes;
    device const half2 * meta;
};

// q4: D/8 little-endian words per slot, element i at bits 4·(i%8) of word i/8.
struct attn_q4 {
    static inline bool predivide() { return true; }
    static inline bool groups() { return true; }

    // sc[u·ATTN_MAXH + j] = q'_j·k for the token in slot[u]: per group
    // s·Σq'n + b·Σq'. Each q' read from threadgroup memory serves the
    // ATTN_TPL tokens of the lane.
    static inline void score(thread float * sc, attn_plane k, thread const uint * slot,
                             threadgroup const float * qs, threadgroup const float * qsum) {
        // 16-byte loads: a slot is D/2 ≥ 32 bytes and planes start 16-byte
        // aligned (the encoder checks).
        device const uint4 * w[ATTN_TPL];
        for (uint u = 0; u < ATTN_TPL; ++u) {
            w[u] = (device const uint4 *) (k.codes + slot[u]*(attn_d/2));
            for (uint j = 0; j < attn_hg; ++j) {
                sc[u*ATTN_MAXH + j] = 0.0f;
            }
        }
        threadgroup const float4 * q4 = (threadgroup const float4 *) qs;
        for (uint g = 0; g < attn_ng; ++g) {
            float acc[ATTN_TPL*ATTN_MAXH];
            for (uint u = 0; u < ATTN_TPL; ++u) {
                for (uint j = 0; j < attn_hg; ++j) {
                    acc[u*ATTN_MAXH + j] = 0.0f;
                }
            }
            for (uint i4 = g*attn_gs/32; i4 < (g + 1)*attn_gs/32; ++i4) {
                uint4 x4[ATTN_TPL];
                for (uint u = 0; u < ATTN_TPL; ++u) {
                    x4[u] = w[u][i4];
                }
                for (uint c = 0; c < 4; ++c) {
                    const uint i = 4*i4 + c; // word i: elements 8i..8i+7
                    float4 lo[ATTN_TPL], hi[ATTN_TPL];
                    for (uint u = 0; u < ATTN_TPL; ++u) {
                        const uint x = x4[u][c];
                        lo[u] = float4(x & 0xFu, x & 0xF0u, x & 0xF00u, x & 0xF000u);
                        hi[u] = float4(x & 0xF0000u, x & 0xF00000u, x & 0xF000000u, x & 0xF0000000u);
                    }
                    for (uint j = 0; j < attn_hg; ++j) {
                        const float4 a = q4[j*attn_d/4 + 2*i], b = q4[j*attn_d/4 + 2*i + 1];
                        for (uint u = 0; u < ATTN_TPL; ++u) {
                            acc[u*ATTN_MAXH + j] += dot(a, lo[u]) + dot(b, hi[u]);
                        }
                    }
                }
            }
            for (uint u = 0; u < ATTN_TPL; ++u) {
                const float2 sb = float2(k.meta[slot[u]*attn_ng + g]);
                for (uint j = 0; j < attn_hg; ++j) {
                    sc[u*ATTN_MAXH + j] += sb.x*acc[u*ATTN_MAXH + j] + sb.y*qsum[j*attn_ng + g];
                }
            }
        }
    }

    // o[j·8 + e] += p_j·s·(n_e·16^e) and ob[j] += p_j·b for word li of the
    // token in slot (one group: 8 ≤ gs); finish divides the 16^e out.
    static inline void accumulate(thread float * o, thread float * ob, attn_plane v, uint slot, uint li,
                                  threadgroup const float * p) {
        const uint x = ((device const uint *) v.codes)[slot*(attn_d/8) + li];
        const float2 sb = float2(v.meta[slot*attn_ng + li*ATTN_EV/attn_gs]);
        for (uint j = 0; j < attn_hg; ++j) {
            const float pj = p[j*ATTN_BT];
            const float w = pj*sb.x;
            ob[j] += pj*sb.y;
            for (uint e = 0; e < ATTN_EV; ++e) {
                o[j*ATTN_EV + e] += w*float(x & (0xFu << (4*e)));
            }
        }
    }

    static inline float finish(float o, float ob, uint e) {
        return o*(1.0f/float(1u << (4*e))) + ob;
    }
};

// q8: D bytes per slot.
struct attn_q8 {
    static inline bool predivide() { return false; }
    static inline bool groups() { return true; }

    static inline void score(thread float * sc, attn_plane k, thread const uint * slot,
                             threadgroup const float * qs, threadgroup const float * qsum) {
        // 16-byte loads, as for q4.
        device const uint4 * c[ATTN_TPL];
        for (uint u = 0; u < ATTN_TPL; ++u) {
            c[u] = (device const uint4 *) (k.codes + slot[u]*attn_d);
            for (uint j = 0; j < attn_hg; ++j) {
                sc[u*ATTN_MAXH + j] = 0.0f;
            }
        }
        threadgroup const float4 * q4 = (threadgroup const float4 *) qs;
        for (uint g = 0; g < attn_ng; ++g) {
            float acc[ATTN_TPL*ATTN_MAXH];
            for (uint u = 0; u < ATTN_TPL; ++u) {
                for (uint j = 0; j < attn_hg; ++j) {
                    acc[u*ATTN_MAXH + j] = 0.0f;
                }
            }
            for (uint i4 = g*attn_gs/16; i4 < (g + 1)*attn_gs/16; ++i4) {
                uint4 x4[ATTN_TPL];
                for (uint u = 0; u < ATTN_TPL; ++u) {
                    x4[u] = c[u][i4];
                }
                for (uint b = 0; b < 4; ++b) {
                    const uint i = 4*i4 + b; // elements 4i..4i+3
                    float4 n[ATTN_TPL];
                    for (uint u = 0; u < ATTN_TPL; ++u) {
                        n[u] = float4(as_type<uchar4>(x4[u][b]));
                    }
                    for (uint j = 0; j < attn_hg; ++j) {
                        const float4 a = q4[j*attn_d/4 + i];
                        for (uint u = 0; u < ATTN_TPL; ++u) {
                            acc[u*ATTN_MAXH + j] += dot(a, n[u]);
                        }
                    }
                }
            }
            for (uint u = 0; u < ATTN_TPL; ++u) {
                const float2 sb = float2(k.meta[slot[u]*attn_ng + g]);
                for (uint j = 0; j < attn_hg; ++j) {
                    sc[u*ATTN_MAXH + j] += sb.x*acc[u*ATTN_MAXH + j] + sb.y*qsum[j*attn_ng + g];
                }
            }
        }
    }

    // Elements 8·li..8·li+7 of the token in slot: o += (p·s)·n, ob += p·b.
    static inline void accumulate(thread float * o, thread float * ob, attn_plane v, uint slot, uint li,
                                  threadgroup const float * p) {
        const uint2 x = ((device const uint2 *) (v.codes + slot*attn_d))[li];
        const float4 n0 = float4(as_type<uchar4>(x.x)), n1 = float4(as_type<uchar4>(x.y));
        const float2 sb = float2(v.meta[slot*attn_ng + li*ATTN_EV/attn_gs]);
        for (uint j = 0; j < attn_hg; ++j) {
            const float pj = p[j*ATTN_BT];
            const float w = pj*sb.x;
            ob[j] += pj*sb.y;
            for (uint e = 0; e < 4; ++e) {
                o[j*ATTN_EV + e] += w*n0[e];
                o[j*ATTN_EV + 4 + e] += w*n1[e];
            }
        }
    }

    static inline float finish(float o, float ob, uint) {
        return o + ob;
    }
};

// f16: D halves per slot (also the staged new rows of prefill).
struct attn_f16 {
    static inline bool predivide() { return false; }
    static inline bool groups() { return false; }

    static inline void score(thread float * sc, attn_plane k, thread const uint * slot,
                             threadgroup const float * qs, threadgroup const float *) {
        // 16-byte loads, as for q4.
        device const uint4 * c[ATTN_TPL];
        for (uint u = 0; u < ATTN_TPL; ++u) {
            c[u] = (device const uint4 *) (k.codes + slot[u]*attn_d*2);
            for (uint j = 0; j < attn_hg; ++j) {
                sc[u*ATTN_MAXH + j] = 0.0f;
            }
        }
        threadgroup const float4 * q4 = (threadgroup const float4 *) qs;
        for (uint i8 = 0; i8 < attn_d/8; ++i8) {
            float4 x[ATTN_TPL], y[ATTN_TPL];
            for (uint u = 0; u < ATTN_TPL; ++u) {
                const uint4 x8 = c[u][i8];
                x[u] = float4(as_type<half4>(x8.xy));
                y[u] = float4(as_type<half4>(x8.zw));
            }
            for (uint j = 0; j < attn_hg; ++j) {
                const float4 a = q4[j*attn_d/4 + 2*i8], b = q4[j*attn_d/4 + 2*i8 + 1];
                for (uint u = 0; u < ATTN_TPL; ++u) {
                    sc[u*ATTN_MAXH + j] += dot(a, x[u]) + dot(b, y[u]);
                }
            }
        }
    }

    static inline void accumulate(thread float * o, thread float *, attn_plane v, uint slot, uint li,
                                  threadgroup const float * p) {
        const uint4 x = ((device const uint4 *) (v.codes + slot*attn_d*2))[li];
        const float4 x0 = float4(as_type<half4>(x.xy)), x1 = float4(as_type<half4>(x.zw));
        for (uint j = 0; j < attn_hg; ++j) {
            const float pj = p[j*ATTN_BT];
            for (uint e = 0; e < 4; ++e) {
                o[j*ATTN_EV + e] += pj*x0[e];
                o[j*ATTN_EV + 4 + e] += pj*x1[e];
            }
        }
    }

    static inline float finish(float o, float, uint) {
        return o;
    }
};

// The residual window's ring: f16 rows as attn_f16 reads them, the same
// sums in the same order, but loaded two halves at a time: the ring follows
// the metadata, so a row is only 4-byte aligned.
struct attn_ring {
    static inline bool predivide() { return false; }
    static inline bool groups() { return false; }

    static inline void score(thread float * sc, attn_plane k, thread const uint * slot,
                             threadgroup const float * qs, threadgroup const float *) {
        device const half2 * c[ATTN_TPL];
        for (uint u = 0; u < ATTN_TPL; ++u) {
            c[u] = (device const half2 *) (k.codes + slot[u]*attn_d*2);
            for (uint j = 0; j < attn_hg; ++j) {
                sc[u*ATTN_MAXH + j] = 0.0f;
            }
        }
        threadgroup const float4 * q4 = (threadgroup const float4 *) qs;
        for (uint i8 = 0; i8 < attn_d/8; ++i8) {
            float4 x[ATTN_TPL], y[ATTN_TPL];
            for (uint u = 0; u < ATTN_TPL; ++u) {
                x[u] = float4(float2(c[u][4*i8]), float2(c[u][4*i8 + 1]));
                y[u] = float4(float2(c[u][4*i8 + 2]), float2(c[u][4*i8 + 3]));
            }
            for (uint j = 0; j < attn_hg; ++j) {
                const float4 a = q4[j*attn_d/4 + 2*i8], b = q4[j*attn_d/4 + 2*i8 + 1];
                for (uint u = 0; u < ATTN_TPL; ++u) {
                    sc[u*ATTN_MAXH + j] += dot(a, x[u]) + dot(b, y[u]);
                }
            }
        }
    }

    static inline void accumulate(thread float * o, thread float *, attn_plane v, uint slot, uint li,
                                  threadgroup const float * p) {
        device const half2 * x = (device const half2 *) (v.codes + slot*attn_d*2) + 4*li;
        const float4 x0 = float4(float2(x[0]), float2(x[1])), x1 = float4(float2(x[2]), float2(x[3]));
        for (uint j = 0; j < attn_hg; ++j) {
            const float pj = p[j*ATTN_BT];
            for (uint e = 0; e < 4; ++e) {
                o[j*ATTN_EV + e] += pj*x0[e];
                o[j*ATTN_EV + 4 + e] += pj*x1[e];
            }
        }
    }

    static inline float finish(float o, float, uint) {
        return o;
    }
};

// ---- the block loop ----

// attn_cap is attn_softcap·tanh(x/attn_softcap) through exp2: tanh|y| =
// (1 - e)/(1 + e), e = 2^(-2·log2(e)·|y|), the sign restored (its
// absolute error is a few 1e-8·attn_softcap; the CPU's is float64's).
inline float attn_cap(float x) {
    const float e = exp2(fabs(x)*(-2.0f*ATTN_LOG2E/attn_softcap));
    const float y = attn_softcap*((1.0f - e)/(1.0f + e));
    return x < 0.0f ? -y : y;
}

// One simdgroup's online-softmax state for attn_hg heads: the lane's
// ATTN_EV elements of each head's o (and ob, V's bias term) over the tokens
// it accumulated, m and l (log2 domain).
struct attn_state {
    float o[ATTN_MAXH*ATTN_EV];
    float ob[ATTN_MAXH];
    float m[ATTN_MAXH];
    float l[ATTN_MAXH];
};

inline void attn_state_init(thread attn_state & st) {
    for (uint j = 0; j < ATTN_MAXH; ++j) {
        for (uint e = 0; e < ATTN_EV; ++e) {
            st.o[j*ATTN_EV + e] = 0.0f;
        }
        st.ob[j] = 0.0f;
        st.m[j] = ATTN_NEG;
        st.l[j] = 0.0f;
    }
}

// attn_blocks runs this simdgroup's blocks of ATTN_BT tokens of the range
// [t0, t1) of slots base+t: blocks start at t0 + ATTN_BT·sg and step by
// ATTN_BT·ATTN_NSG; lane i scores tokens i, i+32, ... of a block. p is the
// simdgroup's attn_hg×ATTN_BT probabilities. scores (when not null) gets
// each head's raw score q·k·scale at [j·score_stride + t], before the cap
// (attn_softcap).
template <typename KV>
inline void attn_blocks(thread attn_state & st, attn_plane k, attn_plane v, uint base, uint t0, uint t1,
                        threadgroup const float * qs, threadgroup const float * qsum, threadgroup float * p,
                        device float * scores, uint score_stride, ushort sg, ushort lane) {
    for (uint b = t0 + ATTN_BT*sg; b < t1; b += ATTN_BT*ATTN_NSG) {
        const uint nb = min(uint(ATTN_BT), t1 - b);
        // Lanes past the end score the last token (no branch around the
        // loads) and drop it.
        uint slot[ATTN_TPL];
        for (uint u = 0; u < ATTN_TPL; ++u) {
            slot[u] = base + b + min(u*32 + lane, nb - 1);
        }
        float sc[ATTN_TPL*ATTN_MAXH];
        KV::score(sc, k, slot, qs, qsum);
        for (uint u = 0; u < ATTN_TPL; ++u) {
            const uint t = u*32 + lane;
            for (uint j = 0; j < attn_hg; ++j) {
                if (t >= nb) {
                    sc[u*ATTN_MAXH + j] = ATTN_NEG;
                    continue;
                }
                if (scores) {
                    scores[j*score_stride + b + t] = sc[u*ATTN_MAXH + j]*(1.0f/ATTN_LOG2E);
                }
                if (attn_softcap > 0.0f) {
                    sc[u*ATTN_MAXH + j] = attn_cap(sc[u*ATTN_MAXH + j]);
                }
            }
        }
        for (uint j = 0; j < attn_hg; ++j) {
            float mx = sc[j];
            for (uint u = 1; u < ATTN_TPL; ++u) {
                mx = max(mx, sc[u*ATTN_MAXH + j]);
            }
            const float mnew = max(st.m[j], simd_max(mx));
            const float alpha = exp2(st.m[j] - mnew);
            float sum = 0.0f;
            for (uint u = 0; u < ATTN_TPL; ++u) {
                const float pj = exp2(sc[u*ATTN_MAXH + j] - mnew);
                p[j*ATTN_BT + u*32 + lane] = pj;
                sum += pj;
            }
            st.l[j] = st.l[j]*alpha + simd_sum(sum);
            st.m[j] = mnew;
            for (uint c = 0; c < attn_cpl; ++c) {
                const uint jc = c*attn_hg + j;
                for (uint e = 0; e < ATTN_EV; ++e) {
                    st.o[jc*ATTN_EV + e] *= alpha;
                }
                st.ob[jc] *= alpha;
            }
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
        // V: lane = sub·attn_lpt + li takes word li of token t+sub, so
        // that a simdgroup covers attn_tpi tokens a step with 4- to
        // 16-byte loads (attn_fold adds the sub partials up at the end).
        const uint sub = lane/attn_lpt, li = lane%attn_lpt;
        if (nb == ATTN_BT && attn_lpt_pow2) {
            // A whole block: a constant trip count the compiler can unroll,
            // so that several tokens' V loads are in flight.
            for (uint t = 0; t < ATTN_BT; t += attn_tpi) {
                for (uint c = 0; c < attn_cpl; ++c) {
                    KV::accumulate(st.o + c*attn_hg*ATTN_EV, st.ob + c*attn_hg, v, base + b + t + sub,
                                   c*attn_lpt + li, p + t + sub);
                }
            }
        } else if (sub < attn_tpi) {
            for (uint t = 0; t < nb; t += attn_tpi) {
                if (t + sub < nb) {
                    for (uint c = 0; c < attn_cpl; ++c) {
                        KV::accumulate(st.o + c*attn_hg*ATTN_EV, st.ob + c*attn_hg, v, base + b + t + sub,
                                       c*attn_lpt + li, p + t + sub);
                    }
                }
            }
        }
        // p is rewritten by the next block.
        simdgroup_barrier(mem_flags::mem_threadgroup);
    }
}

// attn_ring_blocks runs this simdgroup's blocks of positions [t0, t1) read
// from the residual window's ring of kv head kvh (rows rows, ring at byte
// ring of the planes kc and vc): position t is row t % rows, so the range,
// at most rows long, is two runs of consecutive rows, each a plain range of
// attn_blocks whose base is offset by the run's start (uint arithmetic
// wraps, so base + t is the row). scores as attn_blocks'.
inline void attn_ring_blocks(thread attn_state & st, device const char * kc, device const char * vc, ulong ring,
                             uint rows, uint kvh, uint t0, uint t1,
                             threadgroup const float * qs, threadgroup float * p,
                             device float * scores, uint score_stride, ushort sg, ushort lane) {
    const attn_plane k = {kc + ring, (device const half2 *) kc}, v = {vc + ring, (device const half2 *) vc};
    const uint wrap = min(t1, (t0/rows + 1)*rows); // the first run ends at a multiple of rows
    attn_blocks<attn_ring>(st, k, v, kvh*rows - (t0/rows)*rows, t0, wrap, qs, qs, p, scores, score_stride, sg, lane);
    if (wrap < t1) {
        attn_blocks<attn_ring>(st, k, v, kvh*rows - wrap, wrap, t1, qs, qs, p, scores, score_stride, sg, lane);
    }
}

// attn_code_blocks runs this simdgroup's blocks of positions [t0, t1) read
// from the codes of kv head kvh, ctx slots a head, position t at slot
// t % ctx: without a ring t1 ≤ ctx and that is one run; a sliding-window
// layer's ring (the range at most ctx long) is two runs of consecutive
// slots, as attn_ring_blocks splits the residual window's ring.
template <typename KV>
inline void attn_code_blocks(thread attn_state & st, attn_plane k, attn_plane v, uint ctx, uint kvh, uint t0, uint t1,
                             threadgroup const float * qs, threadgroup const float * qsum, threadgroup float * p,
                             device float * scores, uint score_stride, ushort sg, ushort lane) {
    const uint wrap = min(t1, (t0/ctx + 1)*ctx);
    attn_blocks<KV>(st, k, v, kvh*ctx - (t0/ctx)*ctx, t0, wrap, qs, qsum, p, scores, score_stride, sg, lane);
    if (wrap < t1) {
        attn_blocks<KV>(st, k, v, kvh*ctx - wrap, wrap, t1, qs, qsum, p, scores, score_stride, sg, lane);
    }
}

// attn_fold adds up the V partials of lanes that took different tokens of
// the same words (lane li + k·attn_lpt into lane li); lanes below attn_lpt
// then hold the simdgroup's o.
inline void attn_fold(thread attn_state & st, ushort lane) {
    if (!attn_lpt_pow2) {
        // attn_tpi partials a word, not a power of two: one shuffle each.
        for (uint k = 1; k < attn_tpi; ++k) {
            const ushort from = ushort(min(uint(lane) + k*attn_lpt, 31u));
            for (uint j = 0; j < attn_cpl*attn_hg; ++j) {
                for (uint e = 0; e < ATTN_EV; ++e) {
                    const float x = simd_shuffle(st.o[j*ATTN_EV + e], from);
                    if (lane < attn_lpt) {
                        st.o[j*ATTN_EV + e] += x;
                    }
                }
                const float x = simd_shuffle(st.ob[j], from);
                if (lane < attn_lpt) {
                    st.ob[j] += x;
                }
            }
        }
        return;
    }
    for (uint off = 16; off >= attn_lpt; off /= 2) {
        for (uint j = 0; j < attn_cpl*attn_hg; ++j) {
            for (uint e = 0; e < ATTN_EV; ++e) {
                st.o[j*ATTN_EV + e] += simd_shuffle_down(st.o[j*ATTN_EV + e], ushort(off));
            }
            st.ob[j] += simd_shuffle_down(st.ob[j], ushort(off));
        }
    }
}

// attn_settle puts the state's o in element terms (KV::finish), so that
// blocks of another format may continue it.
template <typename KV>
inline void attn_settle(thread attn_state & st) {
    for (uint j = 0; j < attn_cpl*attn_hg; ++j) {
        for (uint e = 0; e < ATTN_EV; ++e) {
            st.o[j*ATTN_EV + e] = KV::finish(st.o[j*ATTN_EV + e], st.ob[j], e);
        }
        st.ob[j] = 0.0f;
    }
}

// attn_merge_head merges the simdgroups' states of head j: o into comb
// (ATTN_NSG×D), m and l through cml (ATTN_NSG×2); it returns m and l of the
// threadgroup and the weights w_s = 2^(m_s - m) of the simdgroups. The
// caller reads o_i = Σ_s w_s·comb[s·D + i], then calls a threadgroup
// barrier before the next head.
template <typename KV>
inline void attn_merge_head(thread attn_state & st, uint j, threadgroup float * comb, threadgroup float * cml,
                            ushort sg, ushort lane, thread float & m, thread float & l, thread float * w) {
    if (lane < attn_lpt) {
        for (uint c = 0; c < attn_cpl; ++c) {
            const uint jc = c*attn_hg + j;
            for (uint e = 0; e < ATTN_EV; ++e) {
                comb[sg*attn_d + (c*attn_lpt + lane)*ATTN_EV + e] = KV::finish(st.o[jc*ATTN_EV + e], st.ob[jc], e);
            }
        }
    }
    if (lane == 0) {
        cml[2*sg] = st.m[j];
        cml[2*sg + 1] = st.l[j];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    m = ATTN_NEG;
    for (uint s = 0; s < ATTN_NSG; ++s) {
        m = max(m, cml[2*s]);
    }
    l = 0.0f;
    for (uint s = 0; s < ATTN_NSG; ++s) {
        // A simdgroup without tokens has m = ATTN_NEG (and so may all).
        w[s] = exp2(cml[2*s] - m);
        l += w[s]*cml[2*s + 1];
    }
}

inline float attn_merged(threadgroup const float * comb, thread const float * w, uint i) {
    float o = 0.0f;
    for (uint s = 0; s < ATTN_NSG; ++s) {
        o += w[s]*comb[s*attn_d + i];
    }
    return o;
}

// ---- decode ----

// The threadgroup memory of decode and prefill, in floats (the encoder
// sizes [[threadgroup(0)]] the same way): sized by the function constants,
// not the largest shape, so that small heads leave room for more
// threadgroups per core.
//   attn_hg·D + attn_hg·ATTN_MAXG + max(ATTN_NSG·attn_hg·ATTN_BT, ATTN_NSG·D) + 2·ATTN_NSG

template <typename KV>
kernel void kernel_attn_decode(
        constant attn_args  & args   [[buffer(0)]],
        device const float  * q      [[buffer(1)]],
        device const char   * kc     [[buffer(2)]],
        device const half2  * km     [[buffer(3)]],
        device const char   * vc     [[buffer(4)]],
        device const half2  * vm     [[buffer(5)]],
        device const float  * lambda [[buffer(6)]],
        device const float  * signs  [[buffer(7)]],
        device       float  * part_o [[buffer(8)]],  // [query head][split][D]
        device       float  * part_ml[[buffer(9)]],  // [query head][split]{m, l}
        device       float  * scores [[buffer(10)]], // attn_scores: [query head][score_stride]
        threadgroup  float  * shmem  [[threadgroup(0)]], // attn_shmem_floats
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort tid  [[thread_index_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float * qs   = shmem;               // attn_hg×D prepared queries
    threadgroup float * qsum = qs + attn_hg*attn_d; // attn_hg×(D/gs ≤ ATTN_MAXG) Σq' per group
    threadgroup float * p    = qsum + attn_hg*ATTN_MAXG; // ATTN_NSG×attn_hg×ATTN_BT probabilities,
    threadgroup float * comb = p;                   // then ATTN_NSG×D for the merge
    threadgroup float * cml  = p + max(uint(ATTN_NSG*attn_hg*ATTN_BT), uint(ATTN_NSG*attn_d)); // ATTN_NSG×{m, l}

    const uint kvh = tg.x/args.chunks;
    const uint h0 = kvh*args.group + (tg.x - kvh*args.chunks)*attn_hg; // first query head served
    const uint split = tg.y;
    const uint t0 = args.lo + split*args.chunk;
    const uint t1 = min(args.n, t0 + args.chunk);
    // [t0, tail) from the codes, [tail, t1) from the residual window's ring.
    const uint tail = max(t0, min(t1, args.tail));

    attn_state st;
    attn_state_init(st);
    const attn_plane k = {kc, km}, v = {vc, vm};
    threadgroup float * ps = p + sg*attn_hg*ATTN_BT;
    device float * sc = attn_scores ? scores + h0*args.score_stride : (device float *) nullptr;
    // Both the same for the whole threadgroup.
    const bool codes = t0 < tail, ring = tail < t1;
    if (codes) {
        attn_prepare_query(qs, qsum, p, q + h0*attn_d, lambda + kvh*attn_d, signs,
                           args.qscale, args.norm, KV::predivide(), KV::groups(), tid, ntg);
        attn_code_blocks<KV>(st, k, v, args.ctx, kvh, t0, tail, qs, qsum, ps, sc, args.score_stride, sg, lane);
    }
    if (ring) {
        if (codes) {
            attn_settle<KV>(st); // the ring's rows continue o in element terms
            threadgroup_barrier(mem_flags::mem_threadgroup); // qs is rewritten
        }
        attn_prepare_query(qs, qsum, p, q + h0*attn_d, lambda + kvh*attn_d, signs,
                           args.qscale, args.norm, false, false, tid, ntg);
        attn_ring_blocks(st, kc, vc, args.ring, args.ring_rows, kvh, tail, t1, qs, ps, sc, args.score_stride, sg, lane);
    }
    attn_fold(st, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup); // comb overlays p

    for (uint j = 0; j < attn_hg; ++j) {
        float m, l, w[ATTN_NSG];
        if (ring) {
            attn_merge_head<attn_ring>(st, j, comb, cml, sg, lane, m, l, w);
        } else {
            attn_merge_head<KV>(st, j, comb, cml, sg, lane, m, l, w);
        }
        const uint part = (h0 + j)*args.splits + split;
        for (uint i = tid; i < attn_d; i += ntg) {
            part_o[part*attn_d + i] = attn_merged(comb, w, i);
        }
        if (tid == 0) {
            part_ml[2*part] = m;
            part_ml[2*part + 1] = l;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

typedef decltype(kernel_attn_decode<attn_q4>) attn_decode_t;

template [[host_name("kernel_attn_decode_q4")]]  kernel attn_decode_t kernel_attn_decode<attn_q4>;
template [[host_name("kernel_attn_decode_q8")]]  kernel attn_decode_t kernel_attn_decode<attn_q8>;
template [[host_name("kernel_attn_decode_f16")]] kernel attn_decode_t kernel_attn_decode<attn_f16>;

// kernel_attn_merge_f32: pass 2, one threadgroup per query head, a thread
// per element: M = max m_s, w_s = 2^(m_s - M), o = Σ w_s·o_s / Σ w_s·l_s.
// With attn_sinks, head h's sink s_h = sinks[h]·log2(e) is one more split
// with m = s_h, l = 1 and o = 0: it joins M and adds 2^(s_h - M) to the
// denominator.
kernel void kernel_attn_merge_f32(
        constant attn_args  & args    [[buffer(0)]],
        device const float  * part_o  [[buffer(1)]],
        device const float  * part_ml [[buffer(2)]],
        device       float  * out     [[buffer(3)]],
        device const float  * sinks   [[buffer(4)]], // attn_sinks: [query head]
        uint   h   [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const uint splits = args.splits;
    device const float * ml = part_ml + 2*h*splits;
    float m = ATTN_NEG;
    for (uint s = 0; s < splits; ++s) {
        m = max(m, ml[2*s]);
    }
    const float sink = attn_sinks ? sinks[h]*ATTN_LOG2E : ATTN_NEG;
    if (attn_sinks) {
        m = max(m, sink);
    }
    float l = 0.0f;
    for (uint s = 0; s < splits; ++s) {
        l += exp2(ml[2*s] - m)*ml[2*s + 1];
    }
    if (attn_sinks) {
        l += exp2(sink - m);
    }
    const float inv = 1.0f/l;
    device const float * o = part_o + h*splits*attn_d;
    for (uint i = tid; i < attn_d; i += ntg) {
        float acc = 0.0f;
        for (uint s = 0; s < splits; ++s) {
            acc += exp2(ml[2*s] - m)*o[s*attn_d + i];
        }
        out[h*attn_d + i] = acc*inv;
    }
}

// ---- decode with the matrix units ----
//
// kernel_attn_decode_mma_<kv>: pass 1 of decode as kernel_attn_decode's
// grid and outputs (part_o, part_ml, the merge unchanged), computed with
// simdgroup matrices (8×8, float): the threadgroup's query heads are the
// 8 rows (heads past attn_hg are zero rows), a simdgroup's block is
// ATTN_MMA_BT tokens (lane t dequantizes token t), and per block
//   S  (8 × BT) = Q' (8 × D) · K^T (D × BT)      scores, 8×8 tiles over D
//   O  (8 × D)  = diag(α)·O + P (8 × BT) · V (BT × D)
// with K and V of the block dequantized to float in threadgroup memory a
// slab of ATTN_MMA_SLAB elements at a time (s·n + b for q4 and q8, the
// halves for f16 and the residual window's ring), so one prepared query
// (no q4 predivision, no per-group sums) serves codes and ring alike. The
// softmax between the two products is the lanes': lane t takes token t of
// every head (score export, soft-cap, mask, the running max and sum), and
// α rescales O's rows through a product with a diagonal matrix, as
// llama.cpp's Metal flash attention does. At the end the simdgroups'
// states are merged through threadgroup memory, one after another.
//
// The arithmetic that makes the scalar kernel compute-bound at GQA 8
// (2·G·D multiply-adds per token) runs as 8×8×8 products: 2·D/8 of them a
// token tile of 8 for all 8 heads.

#define ATTN_MMA_NSG 4  // simdgroups per threadgroup
#define ATTN_MMA_BT  32 // tokens per simdgroup block: one per lane
#define ATTN_MMA_ROWS 8 // query heads a threadgroup, as matrix rows
// Elements of a token dequantized at a time: 32 up to D 256 (where they
// divide D), 16 past it (threadgroup memory), else 8.
#define ATTN_MMA_SLAB (attn_d > 256 ? 16u : (attn_d % 32 == 0 ? 32u : (attn_d % 16 == 0 ? 16u : 8u)))

// The formats' staging: element e0 + e of the token in slot, e < ATTN_MMA_SLAB,
// as float into x.
struct attn_mma_q4 {
    template <typename T>
    static inline void stage(threadgroup T * x, attn_plane p, uint slot, uint e0) {
        device const uint * w = (device const uint *) (p.codes + slot*(attn_d/2)) + e0/8;
        for (uint i = 0; i < ATTN_MMA_SLAB/8; ++i) {
            const uint word = w[i];
            const float2 sb = float2(p.meta[slot*attn_ng + (e0 + 8*i)/attn_gs]);
            for (uint e = 0; e < 8; ++e) {
                x[8*i + e] = T(sb.x*float((word >> (4*e)) & 0xFu) + sb.y);
            }
        }
    }
};

struct attn_mma_q8 {
    template <typename T>
    static inline void stage(threadgroup T * x, attn_plane p, uint slot, uint e0) {
        device const uint * w = (device const uint *) (p.codes + slot*attn_d) + e0/4;
        for (uint i = 0; i < ATTN_MMA_SLAB/4; ++i) {
            const float4 n = float4(as_type<uchar4>(w[i]));
            const float2 sb = float2(p.meta[slot*attn_ng + (e0 + 4*i)/attn_gs]);
            for (uint e = 0; e < 4; ++e) {
                x[4*i + e] = T(sb.x*n[e] + sb.y);
            }
        }
    }
};

struct attn_mma_f16 {
    template <typename T>
    static inline void stage(threadgroup T * x, attn_plane p, uint slot, uint e0) {
        // 16-byte loads: e0 is a multiple of 8 and planes start 16-byte aligned.
        device const uint4 * w = (device const uint4 *) (p.codes + slot*attn_d*2) + e0/8;
        for (uint i = 0; i < ATTN_MMA_SLAB/8; ++i) {
            const uint4 h = w[i];
            const half4 a = as_type<half4>(h.xy), b = as_type<half4>(h.zw);
            for (uint e = 0; e < 4; ++e) {
                x[8*i + e] = T(a[e]);
                x[8*i + 4 + e] = T(b[e]);
            }
        }
    }
};

// The residual window's ring: f16 rows that are only 4-byte aligned.
struct attn_mma_ring {
    template <typename T>
    static inline void stage(threadgroup T * x, attn_plane p, uint slot, uint e0) {
        device const half2 * w = (device const half2 *) (p.codes + slot*attn_d*2) + e0/2;
        for (uint i = 0; i < ATTN_MMA_SLAB/2; ++i) {
            const half2 v = w[i];
            x[2*i] = T(v.x);
            x[2*i + 1] = T(v.y);
        }
    }
};

// attn_mma_stage dequantizes this lane's token (slot) of a run's K or V,
// elements e0.. of a slab, into x: from the residual window's ring (ring)
// or the codes.
template <typename KV, typename T>
inline void attn_mma_stage(threadgroup T * x, attn_plane p, bool ring, uint slot, uint e0) {
    if (ring) {
        attn_mma_ring::stage<T>(x, p, slot, e0);
    } else {
        KV::template stage<T>(x, p, slot, e0);
    }
}

// T is the type of the matrices' operands (Q', K, V, P): float
// (kernel_attn_decode_mma_<kv>) or half (kernel_attn_decode_mmah_<kv>,
// within f16 rounding of q', K, V and p: about 1e-3 of the output's
// scale), accumulated in float either way.
//
// The threadgroup memory, in floats (the encoder sizes [[threadgroup(0)]]
// the same way):
//   8·D + NSG·(BT·ATTN_MMA_SLAB·sizeof(T)/4 + 8·BT + 64 + 16)
template <typename KV, typename T>
kernel void kernel_attn_decode_mma(
        constant attn_args  & args   [[buffer(0)]],
        device const float  * q      [[buffer(1)]],
        device const char   * kc     [[buffer(2)]],
        device const half2  * km     [[buffer(3)]],
        device const char   * vc     [[buffer(4)]],
        device const half2  * vm     [[buffer(5)]],
        device const float  * lambda [[buffer(6)]],
        device const float  * signs  [[buffer(7)]],
        device       float  * part_o [[buffer(8)]],  // [query head][split][D]
        device       float  * part_ml[[buffer(9)]],  // [query head][split]{m, l}
        device       float  * scores [[buffer(10)]], // attn_scores: [query head][score_stride]
        threadgroup  float  * shmem  [[threadgroup(0)]],
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort tid  [[thread_index_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    typedef simdgroup_matrix<T, 8, 8> tmat;
    const uint stage_floats = ATTN_MMA_BT*ATTN_MMA_SLAB*sizeof(T)/4;
    const uint per_sg = stage_floats + ATTN_MMA_ROWS*ATTN_MMA_BT + 64 + 2*ATTN_MMA_ROWS;
    threadgroup float * qs   = shmem; // 8×D; at the end the merged O
    threadgroup T     * qt   = (threadgroup T *) qs; // the same as T (half: converted in place)
    threadgroup float * mine = qs + ATTN_MMA_ROWS*attn_d + sg*per_sg;
    threadgroup T     * stage = (threadgroup T *) mine;          // BT×slab dequantized K or V; then P (8×BT)
    threadgroup float * sp    = mine + stage_floats;             // 8×BT scores
    threadgroup float * dg    = sp + ATTN_MMA_ROWS*ATTN_MMA_BT;    // 8×8 diagonal (α), off-diagonal zero
    threadgroup float * cml   = dg + 64;                         // {m, l} per head

    const uint kvh = tg.x/args.chunks;
    const uint h0 = kvh*args.group + (tg.x - kvh*args.chunks)*attn_hg;
    const uint split = tg.y;
    const uint t0 = args.lo + split*args.chunk;
    const uint t1 = min(args.n, t0 + args.chunk);
    const uint tail = max(t0, min(t1, args.tail));

    // One query for the codes and the ring (both dequantized to values):
    // the first simdgroup's stages hold the rotation's scratch meanwhile.
    attn_prepare_query(qs, qs, shmem + ATTN_MMA_ROWS*attn_d, q + h0*attn_d, lambda + kvh*attn_d, signs,
                       args.qscale, args.norm, false, false, tid, ntg);
    for (uint i = attn_hg*attn_d + tid; i < ATTN_MMA_ROWS*attn_d; i += ntg) {
        qs[i] = 0.0f; // rows without a head
    }
    for (uint i = lane; i < 64; i += 32) {
        dg[i] = 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sizeof(T) < 4) {
        // Narrow the query in place: all reads, then all writes.
        float x[ATTN_MMA_ROWS*ATTN_MAXD/(32*ATTN_MMA_NSG)];
        uint n = 0;
        for (uint i = tid; i < ATTN_MMA_ROWS*attn_d; i += ntg) {
            x[n++] = qs[i];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        n = 0;
        for (uint i = tid; i < ATTN_MMA_ROWS*attn_d; i += ntg) {
            qt[i] = T(x[n++]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    // The O tiles (rows: heads) and each head's m and l (log2 domain;
    // every lane holds the same) of this simdgroup.
    simdgroup_float8x8 o[ATTN_MAXD/8];
    for (uint i = 0; i < attn_d/8; ++i) {
        o[i] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    }
    float m[ATTN_MMA_ROWS], l[ATTN_MMA_ROWS];
    for (uint j = 0; j < ATTN_MMA_ROWS; ++j) {
        m[j] = ATTN_NEG;
        l[j] = 0.0f;
    }
    // The runs of consecutive slots to read: [t0, tail) from the codes
    // (position t at slot t % ctx), [tail, t1) from the residual window's
    // ring (row t % ring_rows); each range wraps at most once, so up to
    // four runs, each with the base that makes base + t its slot.
    uint run_base[4], run_lo[4], run_hi[4];
    bool run_ring[4];
    uint runs = 0;
    if (t0 < tail) {
        const uint ctx = args.ctx, wrap = min(tail, (t0/ctx + 1)*ctx);
        run_base[runs] = kvh*ctx - (t0/ctx)*ctx, run_lo[runs] = t0, run_hi[runs] = wrap, run_ring[runs++] = false;
        if (wrap < tail) {
            run_base[runs] = kvh*ctx - wrap, run_lo[runs] = wrap, run_hi[runs] = tail, run_ring[runs++] = false;
        }
    }
    if (tail < t1) {
        const uint rows = args.ring_rows, wrap = min(t1, (tail/rows + 1)*rows);
        run_base[runs] = kvh*rows - (tail/rows)*rows, run_lo[runs] = tail, run_hi[runs] = wrap, run_ring[runs++] = true;
        if (wrap < t1) {
            run_base[runs] = kvh*rows - wrap, run_lo[runs] = wrap, run_hi[runs] = t1, run_ring[runs++] = true;
        }
    }
    device float * sc = attn_scores ? scores + h0*args.score_stride : (device float *) nullptr;
    const uint slab = ATTN_MMA_SLAB;
    for (uint r = 0; r < runs; ++r) {
        const bool ring = run_ring[r];
        const attn_plane k = ring ? attn_plane{kc + args.ring, km} : attn_plane{kc, km};
        const attn_plane v = ring ? attn_plane{vc + args.ring, vm} : attn_plane{vc, vm};
        // This simdgroup's blocks of ATTN_MMA_BT tokens: from lo + BT·sg,
        // a step of BT·NSG.
        for (uint b = run_lo[r] + ATTN_MMA_BT*sg; b < run_hi[r]; b += ATTN_MMA_BT*ATTN_MMA_NSG) {
            const uint nb = min(uint(ATTN_MMA_BT), run_hi[r] - b);
            // Lanes past the end stage the last token (no branch around
            // the loads); its probabilities are zero.
            const uint slot = run_base[r] + b + min(uint(lane), nb - 1);
            simdgroup_float8x8 s[ATTN_MMA_BT/8];
            for (uint tt = 0; tt < ATTN_MMA_BT/8; ++tt) {
                s[tt] = make_filled_simdgroup_matrix<float, 8>(0.0f);
            }
            for (uint e0 = 0; e0 < attn_d; e0 += slab) {
                attn_mma_stage<KV, T>(stage + lane*slab, k, ring, slot, e0);
                simdgroup_barrier(mem_flags::mem_threadgroup);
                for (uint c = 0; c < slab; c += 8) {
                    tmat qm;
                    simdgroup_load(qm, qt, attn_d, ulong2(e0 + c, 0));
                    for (uint tt = 0; tt < ATTN_MMA_BT/8; ++tt) {
                        tmat km8; // K^T: element (e, t) is stage[t·slab + c + e]
                        simdgroup_load(km8, stage, slab, ulong2(c, 8*tt), true);
                        simdgroup_multiply_accumulate(s[tt], qm, km8, s[tt]);
                    }
                }
                simdgroup_barrier(mem_flags::mem_threadgroup); // the stage is rewritten
            }
            for (uint tt = 0; tt < ATTN_MMA_BT/8; ++tt) {
                simdgroup_store(s[tt], sp, ATTN_MMA_BT, ulong2(8*tt, 0));
            }
            simdgroup_barrier(mem_flags::mem_threadgroup);
            // The softmax: lane = token; P goes to the stage (free until V).
            threadgroup T * ph = stage;
            float amin = 1.0f;
            for (uint j = 0; j < ATTN_MMA_ROWS; ++j) {
                if (j >= attn_hg) {
                    ph[j*ATTN_MMA_BT + lane] = T(0.0f); // a row without a head
                    continue;
                }
                float x = sp[j*ATTN_MMA_BT + lane];
                if (lane >= nb) {
                    x = ATTN_NEG;
                } else {
                    if (sc) {
                        sc[j*args.score_stride + b + lane] = x*(1.0f/ATTN_LOG2E);
                    }
                    if (attn_softcap > 0.0f) {
                        x = attn_cap(x);
                    }
                }
                const float mnew = max(m[j], simd_max(x));
                const float alpha = exp2(m[j] - mnew);
                const float p = exp2(x - mnew);
                ph[j*ATTN_MMA_BT + lane] = T(p);
                l[j] = l[j]*alpha + simd_sum(p);
                m[j] = mnew;
                amin = min(amin, alpha);
                if (lane == 0) {
                    dg[9*j] = alpha;
                }
            }
            simdgroup_barrier(mem_flags::mem_threadgroup);
            simdgroup_float8x8 alpha;
            simdgroup_load(alpha, dg);
            tmat pm[ATTN_MMA_BT/8];
            for (uint tt = 0; tt < ATTN_MMA_BT/8; ++tt) {
                simdgroup_load(pm[tt], ph, ATTN_MMA_BT, ulong2(8*tt, 0));
            }
            simdgroup_barrier(mem_flags::mem_threadgroup); // the stage is rewritten
            // No head's max moved (the same for every lane): O stays.
            const bool rescale = amin < 1.0f;
            for (uint e0 = 0; e0 < attn_d; e0 += slab) {
                attn_mma_stage<KV, T>(stage + lane*slab, v, ring, slot, e0);
                simdgroup_barrier(mem_flags::mem_threadgroup);
                for (uint c = 0; c < slab; c += 8) {
                    const uint i = (e0 + c)/8;
                    if (rescale) {
                        simdgroup_multiply(o[i], alpha, o[i]);
                    }
                    for (uint tt = 0; tt < ATTN_MMA_BT/8; ++tt) {
                        tmat vm8; // V: element (t, e) is stage[t·slab + c + e]
                        simdgroup_load(vm8, stage, slab, ulong2(c, 8*tt));
                        simdgroup_multiply_accumulate(o[i], pm[tt], vm8, o[i]);
                    }
                }
                simdgroup_barrier(mem_flags::mem_threadgroup);
            }
        }
    }

    // Merge the simdgroups: each scales its O's rows by 2^(m_s - M) (a
    // diagonal product), then adds it to the sum in qs, one after another.
    // Each lane writes its own copies: lane j those of head j.
    for (uint j = 0; j < ATTN_MMA_ROWS; ++j) {
        if (lane == j) {
            cml[2*j] = m[j];
            cml[2*j + 1] = l[j];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float mt[ATTN_MMA_ROWS], lt[ATTN_MMA_ROWS];
    for (uint j = 0; j < ATTN_MMA_ROWS; ++j) {
        mt[j] = ATTN_NEG;
        for (uint s = 0; s < ATTN_MMA_NSG; ++s) {
            mt[j] = max(mt[j], shmem[ATTN_MMA_ROWS*attn_d + s*per_sg + (per_sg - 2*ATTN_MMA_ROWS) + 2*j]);
        }
        lt[j] = 0.0f;
        for (uint s = 0; s < ATTN_MMA_NSG; ++s) {
            threadgroup const float * ml = shmem + ATTN_MMA_ROWS*attn_d + s*per_sg + (per_sg - 2*ATTN_MMA_ROWS);
            // A simdgroup without tokens has m = ATTN_NEG (and so may all).
            lt[j] += exp2(ml[2*j] - mt[j])*ml[2*j + 1];
        }
    }
    for (uint j = 0; j < ATTN_MMA_ROWS; ++j) {
        if (lane == j) {
            dg[9*j] = exp2(m[j] - mt[j]);
        }
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_float8x8 ws;
    simdgroup_load(ws, dg);
    for (uint s = 0; s < ATTN_MMA_NSG; ++s) {
        if (sg == s) {
            for (uint i = 0; i < attn_d/8; ++i) {
                simdgroup_float8x8 acc;
                if (s == 0) {
                    simdgroup_multiply(acc, ws, o[i]);
                } else {
                    simdgroup_float8x8 prev;
                    simdgroup_load(prev, qs, attn_d, ulong2(8*i, 0));
                    simdgroup_multiply_accumulate(acc, ws, o[i], prev);
                }
                simdgroup_store(acc, qs, attn_d, ulong2(8*i, 0));
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint j = 0; j < attn_hg; ++j) {
        const uint part = (h0 + j)*args.splits + split;
        for (uint i = tid; i < attn_d; i += ntg) {
            part_o[part*attn_d + i] = qs[j*attn_d + i];
        }
        if (tid == 0) {
            part_ml[2*part] = mt[j];
            part_ml[2*part + 1] = lt[j];
        }
    }
}

typedef decltype(kernel_attn_decode_mma<attn_mma_q4, float>) attn_decode_mma_t;

template [[host_name("kernel_attn_decode_mma_q4")]]   kernel attn_decode_mma_t kernel_attn_decode_mma<attn_mma_q4, float>;
template [[host_name("kernel_attn_decode_mma_q8")]]   kernel attn_decode_mma_t kernel_attn_decode_mma<attn_mma_q8, float>;
template [[host_name("kernel_attn_decode_mma_f16")]]  kernel attn_decode_mma_t kernel_attn_decode_mma<attn_mma_f16, float>;
template [[host_name("kernel_attn_decode_mmah_q4")]]  kernel attn_decode_mma_t kernel_attn_decode_mma<attn_mma_q4, half>;
template [[host_name("kernel_attn_decode_mmah_q8")]]  kernel attn_decode_mma_t kernel_attn_decode_mma<attn_mma_q8, half>;
template [[host_name("kernel_attn_decode_mmah_f16")]] kernel attn_decode_mma_t kernel_attn_decode_mma<attn_mma_f16, half>;

// ---- prefill ----

// kernel_attn_stage_f32: grid (rows, kv heads), attn_d threads. New row r
// of K (kv_heads·D floats a row) as the cache transforms it, k/λ then R·,
// and of V, both rounded through f16, to [kv head][row][D] halves: what an
// f16 cache would hold (the CPU's stageRow).
kernel void kernel_attn_stage_f32(
        constant attn_args  & args   [[buffer(0)]],
        device const float  * k      [[buffer(1)]],
        device const float  * v      [[buffer(2)]],
        device const float  * lambda [[buffer(3)]],
        device const float  * signs  [[buffer(4)]],
        device       half   * sk     [[buffer(5)]],
        device       half   * sv     [[buffer(6)]],
        uint3  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    threadgroup float x[ATTN_MAXD];
    const uint r = tg.x, kvh = tg.y, rows = args.n;
    const uint src = (r*args.kv_heads + kvh)*attn_d + tid;
    const uint dst = (kvh*rows + r)*attn_d + tid;
    sv[dst] = half(v[src]);
    float y = k[src];
    if (attn_smooth) {
        y /= lambda[kvh*attn_d + tid];
    }
    if (attn_rotate) {
        const uint block = attn_d & (0u - attn_d); // P: the butterflies stay in blocks of P
        x[tid] = y*signs[tid];
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint h = 1; h < block; h *= 2) {
            // Thread i < D/2 does the butterfly of pair (a, a+h).
            float a = 0.0f, b = 0.0f;
            uint ia = 0;
            if (tid < attn_d/2) {
                ia = (tid/h)*2*h + tid%h;
                a = x[ia];
                b = x[ia + h];
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            if (tid < attn_d/2) {
                x[ia] = a + b;
                x[ia + h] = a - b;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        y = x[tid]*args.norm;
        if (block < attn_d) {
            // The blocks mixed by Q_m (signs + D), as kv.Rotation does.
            threadgroup_barrier(mem_flags::mem_threadgroup);
            x[tid] = y;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            const uint m = attn_d/block, b = tid/block, jj = tid%block;
            float acc = 0.0f;
            for (uint n = 0; n < m; ++n) {
                acc += signs[attn_d + b*m + n]*x[n*block + jj];
            }
            y = acc;
        }
    }
    sk[dst] = half(y);
}

// kernel_attn_prefill_<kv>: grid (kv head × head chunk, row), row r at
// position past+r. The cached prefix [lo, past) through the cache format,
// then the staged new rows [max(lo, past) - past, r] as f16, where lo is
// the first position the row's window sees; out normalized.
template <typename KV>
kernel void kernel_attn_prefill(
        constant attn_args  & args   [[buffer(0)]],
        device const float  * q      [[buffer(1)]],
        device const char   * kc     [[buffer(2)]],
        device const half2  * km     [[buffer(3)]],
        device const char   * vc     [[buffer(4)]],
        device const half2  * vm     [[buffer(5)]],
        device const float  * lambda [[buffer(6)]],
        device const float  * signs  [[buffer(7)]],
        device const char   * sk     [[buffer(8)]],
        device const char   * sv     [[buffer(9)]],
        device       float  * out    [[buffer(10)]],
        device const float  * sinks  [[buffer(11)]], // attn_sinks: [query head]
        threadgroup  float  * shmem  [[threadgroup(0)]], // attn_shmem_floats
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort tid  [[thread_index_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float * qs   = shmem;               // attn_hg×D prepared queries
    threadgroup float * qsum = qs + attn_hg*attn_d; // attn_hg×(D/gs ≤ ATTN_MAXG) Σq' per group
    threadgroup float * p    = qsum + attn_hg*ATTN_MAXG; // ATTN_NSG×attn_hg×ATTN_BT probabilities,
    threadgroup float * comb = p;                   // then ATTN_NSG×D for the merge
    threadgroup float * cml  = p + max(uint(ATTN_NSG*attn_hg*ATTN_BT), uint(ATTN_NSG*attn_d)); // ATTN_NSG×{m, l}

    const uint kvh = tg.x/args.chunks;
    const uint h0 = kvh*args.group + (tg.x - kvh*args.chunks)*attn_hg;
    // Rows from the last: a dispatch's first threadgroups get the most keys.
    const uint r = args.n - 1 - tg.y;
    const uint past = args.lo, pos = past + r;
    const uint lo = args.window > 0 && pos + 1 > args.window ? pos + 1 - args.window : 0;
    device const float * qrow = q + (r*args.heads + h0)*attn_d;

    attn_state st;
    attn_state_init(st);
    threadgroup float * ps = p + sg*attn_hg*ATTN_BT;
    device float * none = (device float *) nullptr;
    // The prefix: [lo, tail) from the codes, [tail, past) from the
    // residual window's ring.
    const uint tail = max(lo, min(past, args.tail));
    if (lo < tail) {
        attn_prepare_query(qs, qsum, p, qrow, lambda + kvh*attn_d, signs,
                           args.qscale, args.norm, KV::predivide(), KV::groups(), tid, ntg);
        const attn_plane k = {kc, km}, v = {vc, vm};
        attn_code_blocks<KV>(st, k, v, args.ctx, kvh, lo, tail, qs, qsum, ps, none, 0, sg, lane);
        attn_settle<KV>(st); // the ring's and new rows continue o in element terms
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // The ring's and the staged rows meet a plain query (q4 predivides it).
    attn_prepare_query(qs, qsum, p, qrow, lambda + kvh*attn_d, signs,
                       args.qscale, args.norm, false, false, tid, ntg);
    if (tail < past) {
        attn_ring_blocks(st, kc, vc, args.ring, args.ring_rows, kvh, tail, past, qs, ps, none, 0, sg, lane);
    }
    const attn_plane nk = {sk, (device const half2 *) sk}, nv = {sv, (device const half2 *) sv};
    attn_blocks<attn_f16>(st, nk, nv, kvh*args.n, max(lo, past) - past, r + 1, qs, qsum, ps, none, 0, sg, lane);
    attn_fold(st, lane);
    threadgroup_barrier(mem_flags::mem_threadgroup); // comb overlays p

    device float * orow = out + (r*args.heads + h0)*attn_d;
    for (uint j = 0; j < attn_hg; ++j) {
        float m, l, w[ATTN_NSG];
        attn_merge_head<attn_f16>(st, j, comb, cml, sg, lane, m, l, w);
        if (attn_sinks) {
            // The sink joins the max and the denominator (as in the
            // merge of decode); the simdgroups' weights follow the max.
            const float sink = sinks[h0 + j]*ATTN_LOG2E;
            const float mx = max(m, sink);
            const float a = exp2(m - mx);
            l = l*a + exp2(sink - mx);
            for (uint s = 0; s < ATTN_NSG; ++s) {
                w[s] *= a;
            }
        }
        const float inv = 1.0f/l;
        for (uint i = tid; i < attn_d; i += ntg) {
            orow[j*attn_d + i] = attn_merged(comb, w, i)*inv;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

typedef decltype(kernel_attn_prefill<attn_q4>) attn_prefill_t;

template [[host_name("kernel_attn_prefill_q4")]]  kernel attn_prefill_t kernel_attn_prefill<attn_q4>;
template [[host_name("kernel_attn_prefill_q8")]]  kernel attn_prefill_t kernel_attn_prefill<attn_q8>;
template [[host_name("kernel_attn_prefill_f16")]] kernel attn_prefill_t kernel_attn_prefill<attn_f16>;
