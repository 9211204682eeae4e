// kernel_act_round_<form>: y = x rounded the way the CPU backend's matmul
// rounds its activations before it meets weights of a given type
// (engine/quant, after llama.cpp's CPU backend), written back as f32 so the
// mat-vec and mat-mat kernels need no second form of x:
//
//   f16   F16 weights:  y = fp16(x)
//   bf16  BF16 weights: y = bf16(x), nearest even
//   q8_0  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (Q8_0 and Q8_1 activations): per 32
//         elements d = fp16(amax/127), q = rint(x·127/amax), y = d·q
//   q8_k  the K-quants (Q8_K activations): per 256 elements s = ±127/amax,
//         q = rint(s·x), y = (1/s)·q
//
// A product of weights and y then equals the CPU's integer block dot
// products up to float32 summation order, so the Metal backend's logits
// follow the CPU backend's (whose reference logits are llama.cpp's) and not
// a slightly different rounding. (Q8_1's s term, fp16(d·Σq), is not
// reproduced: with y it is d·Σq unrounded.)
#include <metal_stdlib>
using namespace metal;

// The argument struct (setBytes at buffer(0)).
struct act_round_args {
    uint n;        // elements per row: a multiple of 4 (f16, bf16), 32 (q8_0), 256 (q8_k)
    uint x_stride; // bytes between rows of x, a multiple of 16
    uint d_stride; // bytes between rows of y, a multiple of 16
};

// Grid (ceil(n/4/threads), rows); one float4 a thread.
kernel void kernel_act_round_f16(
        constant act_round_args & args [[buffer(0)]],
        device const char       * x    [[buffer(1)]],
        device       char       * dst  [[buffer(2)]],
        uint3 tg  [[threadgroup_position_in_grid]],
        uint  tid [[thread_index_in_threadgroup]],
        uint  ntg [[threads_per_threadgroup]]) {
    const uint i = tg.x*ntg + tid;
    if (i >= args.n/4) {
        return;
    }
    const float4 v = ((device const float4 *) (x + (ulong) tg.y*args.x_stride))[i];
    ((device float4 *) (dst + (ulong) tg.y*args.d_stride))[i] = float4(half4(v));
}

// act_round_bf16 is nearest-even bfloat16, NaN kept (as engine/half).
inline float act_round_bf16(float v) {
    uint b = as_type<uint>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return as_type<float>((b | 0x00400000u) & 0xffff0000u);
    }
    b += 0x7fffu + ((b >> 16) & 1u);
    return as_type<float>(b & 0xffff0000u);
}

kernel void kernel_act_round_bf16(
        constant act_round_args & args [[buffer(0)]],
        device const char       * x    [[buffer(1)]],
        device       char       * dst  [[buffer(2)]],
        uint3 tg  [[threadgroup_position_in_grid]],
        uint  tid [[thread_index_in_threadgroup]],
        uint  ntg [[threads_per_threadgroup]]) {
    const uint i = tg.x*ntg + tid;
    if (i >= args.n/4) {
        return;
    }
    const float4 v = ((device const float4 *) (x + (ulong) tg.y*args.x_stride))[i];
    ((device float4 *) (dst + (ulong) tg.y*args.d_stride))[i] =
        float4(act_round_bf16(v.x), act_round_bf16(v.y), act_round_bf16(v.z), act_round_bf16(v.w));
}

// Grid (ceil(n/32/simdgroups), rows); one simdgroup a 32-block, a lane an
// element, so the block's amax is one simd_max.
kernel void kernel_act_round_q8_0(
        constant act_round_args & args [[buffer(0)]],
        device const char       * x    [[buffer(1)]],
        device       char       * dst  [[buffer(2)]],
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint b = tg.x*nsg + sg;
    if (b >= args.n/32) {
        return;
    }
    const uint i = 32*b + lane;
    const float v = ((device const float *) (x + (ulong) tg.y*args.x_stride))[i];
    const float amax = simd_max(fabs(v));
    const float id = amax != 0.0f ? 127.0f/amax : 0.0f;
    const float q = clamp(rint(v*id), -128.0f, 127.0f);
    ((device float *) (dst + (ulong) tg.y*args.d_stride))[i] = float(half(amax/127.0f))*q;
}

// Grid (ceil(n/256/simdgroups), rows); one simdgroup a 256-block, lane l
// holding elements l + 32k. The CPU takes s = -127/mx with mx the first
// element of largest magnitude; s's sign cancels in q/s (rint is odd and
// |s·x| <= 127), so 127/amax gives the same y without finding mx.
kernel void kernel_act_round_q8_k(
        constant act_round_args & args [[buffer(0)]],
        device const char       * x    [[buffer(1)]],
        device       char       * dst  [[buffer(2)]],
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint b = tg.x*nsg + sg;
    if (b >= args.n/256) {
        return;
    }
    device const float * xb = (device const float *) (x + (ulong) tg.y*args.x_stride) + 256*b;
    device       float * yb = (device       float *) (dst + (ulong) tg.y*args.d_stride) + 256*b;
    float v[8];
    float amax = 0.0f;
    for (short k = 0; k < 8; k++) {
        v[k] = xb[lane + 32*k];
        amax = max(amax, fabs(v[k]));
    }
    amax = simd_max(amax);
    const float iscale = amax != 0.0f ? 127.0f/amax : 0.0f;
    const float d = amax != 0.0f ? 1.0f/iscale : 0.0f;
    for (short k = 0; k < 8; k++) {
        yb[lane + 32*k] = d*rint(iscale*v[k]);
    }
}
