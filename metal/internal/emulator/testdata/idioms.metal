// MSL idioms of llama.cpp-style kernels that the shim must compile: a
// dequantizer into a thread matrix, swizzles, half literals, casts between
// vector and matrix types, fast:: and precise::, program-scope constexpr
// tables. TestIdioms checks the values that are easy to derive.
#include <metal_stdlib>
using namespace metal;
#define N_SIMDWIDTH 32
typedef struct { half d; uint8_t qs[16]; } block_q4_0;
constexpr constant static float kvalues[4] = {-1.0f, -0.5f, 0.5f, 1.0f};
static_assert(sizeof(block_q4_0) == 18, "block size");
template <typename type4x4>
void dequantize_q4_0(device const block_q4_0 * xb, short il, thread type4x4 & reg) {
    device const uint16_t * qs = ((device const uint16_t *)xb + 1);
    const float d1 = il ? (xb->d / 16.h) : xb->d;
    const float d2 = d1 / 256.f;
    const float md = -8.h * xb->d;
    const ushort mask0 = il ? 0x00F0 : 0x000F;
    const ushort mask1 = mask0 << 8;
    float4x4 reg_f;
    for (int i = 0; i < 8; i++) {
        reg_f[i/2][2*(i%2) + 0] = d1 * (qs[i] & mask0) + md;
        reg_f[i/2][2*(i%2) + 1] = d2 * (qs[i] & mask1) + md;
    }
    reg = (type4x4) reg_f;
}
kernel void idioms(device const block_q4_0 * x [[buffer(0)]], device float * y [[buffer(1)]],
                   uint3 tgpig [[threadgroup_position_in_grid]], ushort tiisg [[thread_index_in_simdgroup]]) {
    float4x4 reg;
    dequantize_q4_0(x, 0, reg);
    float4 v = reg[1];
    v.xy += 1.0f;
    v.z++;
    float2 a = v.xx;
    half4 h = half4(v);
    half2 hh = as_type<half2>(as_type<uint>(float(h.x)));
    uchar4 u = uchar4(1, 2, 3, 4);
    bool4 m = v > float4(0.5f);
    float4 s = select(float4(0), v, m);
    s = fabs(s) + abs(int(u.x)) + min(uint(3), uint(tgpig.x)) + max(h.x, h.y);
    s += simd_shuffle_down(s, 1);
    s.w = fast::exp(s.w) + precise::sqrt(2.0f) + metal::exp2(1.0f) + kvalues[tiisg % 4];
    float acc = dot(s, float4(1)) + a.y + float(hh.x) * 0;
    if (all(tgpig == uint3(0))) { y[tiisg] = acc; }
    float sumf = 0;
    for (short i = 0; i < 4; ++i) { sumf += reg[i][tiisg % 4]; }
    y[32 + tiisg] = simd_sum(sumf) + (tiisg < N_SIMDWIDTH/2 ? 1 : 0) + length(float2(3, 4));
    half4x4 hm = half4x4(reg);
    y[64 + tiisg] = float(hm[0][0]);
}
