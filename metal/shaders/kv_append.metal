// kernel_kv_append_{f16,q8,q4}: store rows rows of K and V (kv_heads·d
// floats each, heads concatenated) at positions pos..pos+rows-1 of one
// layer's planes, in the layout of docs/ARCHITECTURE.md ("KV cache format"):
// codes [head][pos], then for q8 and q4 the metadata, one half2
// {scale, bias} per group of gs, [head][pos][group].
//
// The bytes are the CPU cache's (engine/kv Cache.Append): K is divided by λ
// (smoothing), then rotated as kv.Rotation does for d = P·m (P the largest
// power of two dividing d, m odd): signs, a Walsh–Hadamard transform scaled
// by 1/√P on each block of P elements (the butterflies in the CPU's order),
// then for m > 1 each element j of the blocks replaced by the orthonormal
// m-point DCT-II Q_m of the m blocks' elements j (the sum in the CPU's
// order); then quantized as engine/kv/quant.go does: min/max per group,
// scale = max((max - min)/L, 2^-14) and bias = min rounded to fp16 first,
// codes clamp(rint((x - bias)/scale), 0, L) from the rounded values.
//
// With a residual window (window > 0, q8 and q4), rows ring_from.. of the
// batch (the last window rows) are also stored as f16 in the plane's ring,
// row (head·window + position % window) of d halves: K as its codes see it
// (smoothed and rotated), V as given (engine/kv residual.go's storeTail).
//
// With rope_pairs > 0, K is rotated by RoPE (norm: pairs 2j, 2j+1, each in
// one lane's chunk) at position pos + row before anything else
// (kv_append_rope): RoPE fused into the store, for a K that nothing else
// reads (a decode step's; the K tensor itself is left as given).
//
// One thread per 8 consecutive elements of a head vector (one q4 word), a
// head vector in d/8 consecutive lanes: a group's min/max and the rotation's
// butterflies and block mixing across chunks are simd shuffles, no
// threadgroup memory and no barrier. For d ≤ 256 a simdgroup holds
// vps = 32/(d/8) whole head vectors (lanes from vps·d/8 on idle), so that a
// vector's shuffles stay in its simdgroup; larger head dims (no rotation)
// run vectors across simdgroups, one thread per chunk. Grid: (ceil(threads
// needed / threads), 2): y = 0 stores K, y = 1 stores V. Threads: a
// multiple of 32.
#include <metal_stdlib>
using namespace metal;

// The argument struct (setBytes at buffer(0)).
struct kv_append_args {
    uint  d;        // head dim, a multiple of 8 (and of gs)
    uint  gs;       // elements per {scale, bias} group: 32 or 64 (q8, q4)
    uint  kv_heads;
    uint  ctx;      // slots per head in a plane (a ring's: position % ctx)
    uint  pos;      // position of the first row
    uint  n;        // chunks of 8 to store per plane: rows·kv_heads·d/8
    uint  smooth;   // divide K by λ
    uint  rotate;   // rotate K (d/8 at most 32)
    float norm;     // the rotation's 1/√P, as the CPU rounds it
    uint  vps;      // head vectors per simdgroup (0: one thread per chunk)
    uint  window;   // residual window: ring rows per head (0: none)
    uint  ring_from;// first row of the batch stored in the ring too
    ulong meta;     // byte offset of the metadata in a plane
    ulong ring;     // byte offset of the ring in a plane (4-byte aligned)
    uint  rope_pairs;  // RoPE on K first (norm: pairs 2j, 2j+1), its rotated pairs; 0: none
    float rope_mscale; // its attention factor on cos and sin (1: none)
};

// kv_append_rope rotates the pairs of this lane's chunk c (pairs 4c ..
// 4c+3, those below pairs) by p·freq[j], as kernel_rope_norm_f32 does
// (the same angle, cos and sin, products): K stored as if RoPE had run on
// it first, position p = pos + row, one dispatch fewer a layer.
inline void kv_append_rope(thread float4 & x0, thread float4 & x1, uint c, float p, device const float2 * freq,
                           uint pairs, float mscale) {
    float e[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    for (uint t = 0; t < 4; t++) {
        const uint j = 4*c + t;
        if (j < pairs) {
            const float r  = rope_angle(p, freq[j]);
            const float co = precise::cos(r)*mscale;
            const float si = precise::sin(r)*mscale;
            const float a = e[2*t], b = e[2*t + 1];
            e[2*t]     = a*co - b*si;
            e[2*t + 1] = a*si + b*co;
        }
    }
    x0 = float4(e[0], e[1], e[2], e[3]);
    x1 = float4(e[4], e[5], e[6], e[7]);
}

// kv_append_rotate applies the Walsh–Hadamard transform, times norm, to each
// block of a head vector held 8 elements a lane, a block in the
// block_lanes = P/8 lanes of its chunks (c: this lane's chunk). The stages
// run as engine/kv's hadamard runs them (span 1, 2, 4, ...), each element
// the same a+b or a-b of the same operands, so the result is the CPU's bit
// for bit. Blocks start at multiples of block_lanes lanes (head vectors at
// multiples of d/8 lanes, a multiple of P/8), so the partner lane c^m is in
// the block.
inline void kv_append_rotate(thread float4 & x0, thread float4 & x1, uint c, uint block_lanes, float norm) {
    // Spans 1 and 2 inside each float4, span 4 between them.
    float4 a = float4(x0.x, x0.z, x1.x, x1.z);
    float4 b = float4(x0.y, x0.w, x1.y, x1.w);
    float4 s = a + b, t = a - b;
    x0 = float4(s.x, t.x, s.y, t.y);
    x1 = float4(s.z, t.z, s.w, t.w);
    a = float4(x0.xy, x1.xy);
    b = float4(x0.zw, x1.zw);
    s = a + b;
    t = a - b;
    x0 = float4(s.xy, t.xy);
    x1 = float4(s.zw, t.zw);
    s = x0 + x1;
    x1 = x0 - x1;
    x0 = s;
    // Spans 8, 16, ...: the partner chunk is the lane c^m lanes away.
    for (uint m = 1; m < block_lanes; m <<= 1) {
        const float4 p0 = simd_shuffle_xor(x0, (ushort) m);
        const float4 p1 = simd_shuffle_xor(x1, (ushort) m);
        if (c & m) {
            x0 = p0 - x0;
            x1 = p1 - x1;
        } else {
            x0 = x0 + p0;
            x1 = x1 + p1;
        }
    }
    x0 *= norm;
    x1 *= norm;
}

// kv_append_mix replaces, for m > 1 blocks, this lane's 8 elements of block
// b = c/block_lanes by Σ_n Q_m[b][n]·(the same elements of block n), read
// from lane first + n·block_lanes + c%block_lanes (first: the head vector's
// first lane), summed over n in order from zero as engine/kv's mixBlocks
// does. q is Q_m row-major. Every lane of the simdgroup runs the shuffles.
inline void kv_append_mix(thread float4 & x0, thread float4 & x1, uint c, uint first, uint block_lanes, uint m,
                          device const float * q) {
    const uint b = c/block_lanes, j = c%block_lanes;
    float4 y0 = float4(0.0f), y1 = float4(0.0f);
    for (uint n = 0; n < m; ++n) {
        const ushort from = ushort(first + n*block_lanes + j);
        const float4 p0 = simd_shuffle(x0, from);
        const float4 p1 = simd_shuffle(x1, from);
        const float w = q[b*m + n];
        y0 += w*p0;
        y1 += w*p1;
    }
    x0 = y0;
    x1 = y1;
}

// kv_append_codes is clamp(rint((x - bias)/scale), 0, L); NaN gives 0.
inline uint4 kv_append_codes(float4 x, float scale, float bias, float L) {
    const float4 q = rint((x - bias)/scale);
    return uint4(select(float4(0.0f), min(q, L), q > 0.0f));
}

// L: 0 stores f16, else the code levels (255 for q8, 15 for q4).
template <int L>
kernel void kernel_kv_append(
        constant kv_append_args & args   [[buffer(0)]],
        device const float      * k      [[buffer(1)]],
        device const float      * v      [[buffer(2)]],
        device const float      * lambda [[buffer(3)]], // kv_heads·d (read when smooth)
        device const float      * signs  [[buffer(4)]], // d ±1, then Q_m (m·m, m > 1) (read when rotate)
        device       char       * kp     [[buffer(5)]],
        device       char       * vp     [[buffer(6)]],
        device const float2     * freq   [[buffer(7)]], // rope_pairs {hi, lo} angles per position (read when rope_pairs > 0)
        uint2 tg  [[threadgroup_position_in_grid]],
        uint  tid [[thread_index_in_threadgroup]],
        uint  ntg [[threads_per_threadgroup]]) {
    const uint gid    = tg.x*ntg + tid;
    const uint chunks = args.d/8;
    uint vec, c, lane = gid % 32; // vec: row·kv_heads + head; c: chunk of the head vector
    if (args.vps > 0) {
        if (lane >= args.vps*chunks) {
            return; // no head vector here: no live lane needs this one
        }
        vec = (gid/32)*args.vps + lane/chunks;
        c = lane % chunks;
    } else {
        vec = gid/chunks;
        c = gid - vec*chunks;
    }
    if (vec*chunks >= args.n) {
        return; // whole head vectors end here: no live lane needs this one
    }
    const bool is_k   = tg.y == 0;
    const uint row    = vec/args.kv_heads;
    const uint h      = vec - row*args.kv_heads;

    device const float4 * src = (device const float4 *) ((is_k ? k : v) + ((ulong) vec*chunks + c)*8);
    float4 x0 = src[0];
    float4 x1 = src[1];
    if (is_k && args.rope_pairs > 0) {
        kv_append_rope(x0, x1, c, float(args.pos + row), freq, args.rope_pairs, args.rope_mscale);
    }
    if (is_k && args.smooth) {
        device const float4 * l = (device const float4 *) (lambda + h*args.d + c*8);
        x0 /= l[0];
        x1 /= l[1];
    }
    if (is_k && args.rotate) {
        device const float4 * s = (device const float4 *) (signs + c*8);
        x0 *= s[0];
        x1 *= s[1];
        const uint block = args.d & (0u - args.d); // P
        kv_append_rotate(x0, x1, c, block/8, args.norm);
        if (block < args.d) {
            kv_append_mix(x0, x1, c, lane - c, block/8, args.d/block, signs + args.d);
        }
    }

    device char * plane = is_k ? kp : vp;
    // head·ctx + position mod ctx: a sliding-window layer's ring has ctx
    // slots (the host stores at most ctx rows a dispatch); elsewhere the
    // position is below ctx.
    const ulong slot = (ulong) h*args.ctx + (args.pos + row) % args.ctx;
    if (L == 0) {
        device half4 * dst = (device half4 *) (plane + (slot*args.d + c*8)*2);
        dst[0] = half4(x0);
        dst[1] = half4(x1);
        return;
    }
    if (args.window > 0 && row >= args.ring_from) {
        // Two halves a store: the ring follows the metadata, whose size is
        // only a multiple of 4 bytes.
        const ulong ring_row = (ulong) h*args.window + (args.pos + row) % args.window;
        device half2 * dst = (device half2 *) (plane + args.ring + (ring_row*args.d + c*8)*2);
        dst[0] = half2(x0.xy);
        dst[1] = half2(x0.zw);
        dst[2] = half2(x1.xy);
        dst[3] = half2(x1.zw);
    }

    // The group's min and max over its gs/8 lanes (aligned: d is a
    // multiple of gs, and head vectors start at multiples of d/8 lanes).
    const uint lanes = args.gs/8;
    float mn = min(min(min(x0.x, x0.y), min(x0.z, x0.w)), min(min(x1.x, x1.y), min(x1.z, x1.w)));
    float mx = max(max(max(x0.x, x0.y), max(x0.z, x0.w)), max(max(x1.x, x1.y), max(x1.z, x1.w)));
    for (uint m = 1; m < lanes; m <<= 1) {
        mn = min(mn, simd_shuffle_xor(mn, (ushort) m));
        mx = max(mx, simd_shuffle_xor(mx, (ushort) m));
    }
    mn = clamp(mn, -65504.0f, 65504.0f);
    mx = clamp(mx, -65504.0f, 65504.0f);
    const float s  = max((mx - mn)/float(L), 1.0f/16384.0f);
    const half  hs = half(min(s, 65504.0f));
    const half  hb = half(mn);
    const float scale = float(hs), bias = float(hb);

    const uint4 q0 = kv_append_codes(x0, scale, bias, float(L));
    const uint4 q1 = kv_append_codes(x1, scale, bias, float(L));
    if (L == 15) {
        device uint * dst = (device uint *) (plane + slot*(args.d/2) + c*4);
        *dst = q0.x | q0.y << 4 | q0.z << 8 | q0.w << 12 | q1.x << 16 | q1.y << 20 | q1.z << 24 | q1.w << 28;
    } else {
        device uint * dst = (device uint *) (plane + slot*args.d + c*8);
        dst[0] = q0.x | q0.y << 8 | q0.z << 16 | q0.w << 24;
        dst[1] = q1.x | q1.y << 8 | q1.z << 16 | q1.w << 24;
    }
    if (c % lanes == 0) {
        device half2 * meta = (device half2 *) (plane + args.meta);
        meta[slot*(args.d/args.gs) + c/lanes] = half2(hs, hb);
    }
}

typedef decltype(kernel_kv_append<0>) kv_append_t;

template [[host_name("kernel_kv_append_f16")]] kernel kv_append_t kernel_kv_append<0>;
template [[host_name("kernel_kv_append_q8")]]  kernel kv_append_t kernel_kv_append<255>;
template [[host_name("kernel_kv_append_q4")]]  kernel kv_append_t kernel_kv_append<15>;
