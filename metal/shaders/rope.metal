// kernel_rope_{norm,neox}_f32: rotary position embedding in place. Row r of
// x holds heads heads of head_dim floats; the first 2·pairs elements of each
// head are rotated pairwise, pair j by pos[r]·freq[j] radians: (2j, 2j+1)
// (norm) or (j, j+pairs) (NeoX).
//
// freq[j] is the pair's angle per position, scale·base^(-2j/dims)/factor_j,
// computed on the host in float64 (as the CPU backend does) and passed as
// two floats, hi + lo. The angle is formed from them with an exact product
// error and reduced mod 2π (Cody–Waite) before sin and cos, so it is
// within ~3e-7 rad of the CPU's float64 angle at any position: a plain
// float32 pos·freq would be off by ~pos·2^-24 rad, 0.008 at 128K.
//
// Grid: (rows, ceil(heads/hpg)); threads: one per pair (a multiple of 32,
// at least pairs). A thread computes its pair's sin and cos once and
// rotates that pair in hpg heads.
//
// LongRoPE's per-pair factors are folded into freq on the host (they divide
// it, as Llama 3.1's rope_freqs do); its attention factor, mscale, multiplies
// cos and sin after they are rounded to float, as the CPU backend does
// (1 when the model has none).
//
// YaRN (ggml's rope_yarn) needs nothing more here: its blend of the
// interpolated angle θ·scale and the extrapolated θ is θ·(scale·(1−r_j) +
// r_j) for a ramp r_j per pair, still a constant per pair times the
// position, so the host folds it into freq (in float64, with the pair's
// other factors) and its magnitude correction into mscale
// (metal/encoder/rope.go). ggml-metal computes the same per thread in
// float32.
#include <metal_stdlib>
using namespace metal;

// The argument struct (setBytes at buffer(0)).
struct rope_args {
    uint heads;    // heads per row
    uint head_dim; // floats between heads
    uint pairs;    // rotated pairs per head: dims/2
    uint hpg;      // heads per threadgroup
    float mscale;  // multiplies cos and sin (LongRoPE's attention factor; 1: none)
};

// rope_angle (common.metal) forms the angle.

template <bool NEOX>
kernel void kernel_rope(
        constant rope_args & args [[buffer(0)]],
        device       float * x    [[buffer(1)]],
        device const int   * pos  [[buffer(2)]],
        device const float2* freq [[buffer(3)]],
        uint2 tg [[threadgroup_position_in_grid]],
        uint  j  [[thread_index_in_threadgroup]]) {
    if (j >= args.pairs) {
        return;
    }
    const uint  row = tg.x;
    const float r   = rope_angle(float(pos[row]), freq[j]);
    // precise::: Metal's fast sin and cos are off by up to 2^-13 in [-π, π].
    const float c   = precise::cos(r)*args.mscale;
    const float s   = precise::sin(r)*args.mscale;
    const uint  a   = NEOX ? j : 2*j;
    const uint  b   = NEOX ? j + args.pairs : 2*j + 1;
    const uint  h0  = tg.y*args.hpg;
    const uint  h1  = min(h0 + args.hpg, args.heads);
    for (uint h = h0; h < h1; ++h) {
        device float * v = x + ((ulong) row*args.heads + h)*args.head_dim;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0*c - x1*s;
        v[b] = x0*s + x1*c;
    }
}

typedef decltype(kernel_rope<false>) rope_t;

template [[host_name("kernel_rope_norm_f32")]] kernel rope_t kernel_rope<false>;
template [[host_name("kernel_rope_neox_f32")]] kernel rope_t kernel_rope<true>;
