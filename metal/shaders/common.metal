// The weight formats: GGUF's block structs (byte for byte as ggml's) and one
// dequantizer per type, shared by get_rows, mul_mv and mul_mm. This file
// comes first in the library; the others use it and must not redeclare it.
//
// API, for a block type B (block_f32 ... block_q6_k below):
//
//   weight_traits<B>::qk   elements per block (32 for the legacy quants, 256
//                          for the K-quants, 16 for the float types)
//   weight_traits<B>::nl   16-element chunks per block, qk/16
//   weight_traits<B>::dequant16(b, il, out)
//                          the same as dequant16_<t>(b, il, out):
//
//   template <typename T4x4>
//   void dequant16_<t>(device const block_<t> * b, short il, thread T4x4 & out);
//
// writes elements il*16 .. il*16+15 of block b in natural order,
// out[i/4][i%4] = element il*16 + i, for 0 <= il < nl. T4x4 is float4x4 or
// half4x4. The values are those of engine/quant's dequantizers: the same
// float32 products in the same order (d·sc first, then ·q, then - dmin·m),
// so on a device without fused multiply-add they are bit-identical.
//
// The float types have no blocks in GGUF; block_f32, block_f16 and
// block_bf16 are 16 consecutive elements, so a row of n elements is n/16 of
// them (n must be a multiple of 16). bf16 is read as ushort and widened by
// hand, which needs no bfloat support from the Metal version.
//
// A row of a weight is n/qk consecutive blocks; rows are type-size·n/qk
// bytes apart. Every block's size but MXFP4's is even, so those blocks stay
// 2-byte aligned and their dequantizers read codes as ushort (two bytes a
// load); MXFP4's 17-byte blocks (and so its rows) may start at any byte and
// are read a byte at a time. The float types read float4/half4, so their
// rows must start 16-byte aligned (GGUF aligns tensors to 32 bytes).
#include <metal_stdlib>
using namespace metal;

// ---- the float types, as 16-element "blocks" ----

struct block_f32  { float  v[16]; };
struct block_f16  { half   v[16]; };
struct block_bf16 { ushort v[16]; };

// ---- legacy quants: 32 elements per block ----

// (q - 8)·d; low nibbles are elements 0..15, high nibbles 16..31.
struct block_q4_0 {
    half    d;
    uint8_t qs[16];
};

// q·d + m.
struct block_q4_1 {
    half    d;
    half    m;
    uint8_t qs[16];
};

// (q - 16)·d; bit j of qh (little-endian) is bit 4 of element j.
struct block_q5_0 {
    half    d;
    uint8_t qh[4];
    uint8_t qs[16];
};

// q·d + m, q of 5 bits as in Q5_0.
struct block_q5_1 {
    half    d;
    half    m;
    uint8_t qh[4];
    uint8_t qs[16];
};

// q·d.
struct block_q8_0 {
    half   d;
    int8_t qs[32];
};

// MXFP4 (the OCP Microscaling spec's E2M1 elements with a shared E8M0
// scale; ggml's block_mxfp4): element i of the low nibbles (i < 16) and
// i + 16 of the high nibbles of qs[i], each kvalues_mxfp4[q]·2^(e - 128):
// the table holds twice E2M1's values, so the scale is halved.
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[16];
};

// ---- K-quants: 256 elements per super-block ----

// d·(sc & 15)·q - dmin·(sc >> 4), per 16 elements; element e is bits
// 2·((e%128)/32) of qs[(e/128)·32 + e%32].
struct block_q2_k {
    uint8_t scales[16];
    uint8_t qs[64];
    half    d;
    half    dmin;
};

// d·(sc - 32)·(q - 4·!hbit); 6-bit scales packed in 12 bytes.
struct block_q3_k {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    half    d;
};

// d·sc·q - dmin·m per 32 elements; 6-bit scales and mins packed in 12 bytes;
// 32 bytes per 64 elements, low nibbles first.
struct block_q4_k {
    half    d;
    half    dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};

// Q4_K with a fifth bit from qh.
struct block_q5_k {
    half    d;
    half    dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};

// d·sc·(q - 32) per 16 elements; 4 low bits in ql, 2 high bits in qh.
struct block_q6_k {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t  scales[16];
    half    d;
};

static_assert(sizeof(block_q4_0) == 18,  "block_q4_0");
static_assert(sizeof(block_q4_1) == 20,  "block_q4_1");
static_assert(sizeof(block_q5_0) == 22,  "block_q5_0");
static_assert(sizeof(block_q5_1) == 24,  "block_q5_1");
static_assert(sizeof(block_q8_0) == 34,  "block_q8_0");
static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4");
static_assert(sizeof(block_q2_k) == 84,  "block_q2_k");
static_assert(sizeof(block_q3_k) == 110, "block_q3_k");
static_assert(sizeof(block_q4_k) == 144, "block_q4_k");
static_assert(sizeof(block_q5_k) == 176, "block_q5_k");
static_assert(sizeof(block_q6_k) == 210, "block_q6_k");

// ---- dequantizers ----

template <typename T4x4>
void dequant16_f32(device const block_f32 * b, short il, thread T4x4 & out) {
    device const float4 * v = (device const float4 *) b->v;
    out = T4x4(float4x4(v[0], v[1], v[2], v[3]));
}

template <typename T4x4>
void dequant16_f16(device const block_f16 * b, short il, thread T4x4 & out) {
    device const half4 * v = (device const half4 *) b->v;
    out = T4x4(float4x4(float4(v[0]), float4(v[1]), float4(v[2]), float4(v[3])));
}

// bf16 is the high half of a float32.
inline float4 common_bf16x4(ushort4 u) {
    return float4(as_type<float>(uint(u.x) << 16), as_type<float>(uint(u.y) << 16),
                  as_type<float>(uint(u.z) << 16), as_type<float>(uint(u.w) << 16));
}

template <typename T4x4>
void dequant16_bf16(device const block_bf16 * b, short il, thread T4x4 & out) {
    device const ushort4 * v = (device const ushort4 *) b->v;
    out = T4x4(float4x4(common_bf16x4(v[0]), common_bf16x4(v[1]), common_bf16x4(v[2]), common_bf16x4(v[3])));
}

template <typename T4x4>
void dequant16_q4_0(device const block_q4_0 * b, short il, thread T4x4 & out) {
    const float d = b->d;
    device const ushort * qs = (device const ushort *) b->qs;
    const short shift = il*4;
    float4x4 t;
    for (short i = 0; i < 8; i++) {
        const ushort v = qs[i] >> shift; // elements 2i (bits 0..3) and 2i+1 (bits 8..11)
        t[i/2][2*(i%2) + 0] = float(v & 15) - 8.0f;
        t[i/2][2*(i%2) + 1] = float((v >> 8) & 15) - 8.0f;
    }
    out = T4x4(t*d);
}

template <typename T4x4>
void dequant16_q4_1(device const block_q4_1 * b, short il, thread T4x4 & out) {
    const float d = b->d;
    const float m = b->m;
    device const ushort * qs = (device const ushort *) b->qs;
    const short shift = il*4;
    float4x4 t;
    for (short i = 0; i < 8; i++) {
        const ushort v = qs[i] >> shift;
        t[i/2][2*(i%2) + 0] = float(v & 15)*d + m;
        t[i/2][2*(i%2) + 1] = float((v >> 8) & 15)*d + m;
    }
    out = T4x4(t);
}

// common_qh32 reads Q5's 32 high bits (the field is only 2-byte aligned).
inline uint common_qh32(device const uint8_t * qh) {
    return uint(qh[0]) | uint(qh[1]) << 8 | uint(qh[2]) << 16 | uint(qh[3]) << 24;
}

template <typename T4x4>
void dequant16_q5_0(device const block_q5_0 * b, short il, thread T4x4 & out) {
    const float d = b->d;
    const uint qh = common_qh32(b->qh) >> (il*16);
    const short shift = il*4;
    float4x4 t;
    for (short i = 0; i < 16; i++) {
        const int q = ((b->qs[i] >> shift) & 15) | ((qh >> i) & 1) << 4;
        t[i/4][i%4] = float(q - 16);
    }
    out = T4x4(t*d);
}

template <typename T4x4>
void dequant16_q5_1(device const block_q5_1 * b, short il, thread T4x4 & out) {
    const float d = b->d;
    const float m = b->m;
    const uint qh = common_qh32(b->qh) >> (il*16);
    const short shift = il*4;
    float4x4 t;
    for (short i = 0; i < 16; i++) {
        const int q = ((b->qs[i] >> shift) & 15) | ((qh >> i) & 1) << 4;
        t[i/4][i%4] = float(q)*d + m;
    }
    out = T4x4(t);
}

template <typename T4x4>
void dequant16_q8_0(device const block_q8_0 * b, short il, thread T4x4 & out) {
    const float d = b->d;
    device const char2 * q = (device const char2 *) (b->qs + il*16); // 2-byte aligned
    float4x4 t;
    for (short i = 0; i < 4; i++) {
        t[i] = float4(float2(q[2*i]), float2(q[2*i + 1]));
    }
    out = T4x4(t*d);
}

// common_kvalues_mxfp4 is E2M1's values doubled (ggml's kvalues_mxfp4).
constant float common_kvalues_mxfp4[16] = {
    0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 8.0f, 12.0f, 0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -6.0f, -8.0f, -12.0f,
};

// common_e8m0_half is 2^(e - 128) (ggml's GGML_E8M0_TO_FP32_HALF): a
// subnormal for e < 2, exact for every e.
inline float common_e8m0_half(uint8_t e) {
    return as_type<float>(e < 2 ? uint(0x00200000) << e : uint(e - 1) << 23);
}

template <typename T4x4>
void dequant16_mxfp4(device const block_mxfp4 * b, short il, thread T4x4 & out) {
    const float d = common_e8m0_half(b->e);
    const short shift = il*4;
    float4x4 t;
    for (short i = 0; i < 16; i++) {
        t[i/4][i%4] = common_kvalues_mxfp4[(b->qs[i] >> shift) & 15]*d;
    }
    out = T4x4(t);
}

template <typename T4x4>
void dequant16_q2_k(device const block_q2_k * b, short il, thread T4x4 & out) {
    const uint8_t s = b->scales[il];
    const float dl = float(b->d)*float(s & 15);
    const float ml = float(b->dmin)*float(s >> 4);
    device const uint8_t * q = b->qs + (il/8)*32 + (il%2)*16;
    const short shift = 2*((il%8)/2);
    float4x4 t;
    for (short i = 0; i < 16; i++) {
        t[i/4][i%4] = dl*float((q[i] >> shift) & 3) - ml;
    }
    out = T4x4(t);
}

// common_q3k_scale is the 6-bit scale j of a Q3_K block, less its offset 32.
inline int common_q3k_scale(device const uint8_t * p, short j) {
    const int lo = (p[j%8] >> (4*(j/8))) & 15;
    const int hi = (p[8 + j%4] >> (2*(j/4))) & 3;
    return (lo | hi << 4) - 32;
}

template <typename T4x4>
void dequant16_q3_k(device const block_q3_k * b, short il, thread T4x4 & out) {
    const float dl = float(b->d)*float(common_q3k_scale(b->scales, il));
    device const uint8_t * q = b->qs + (il/8)*32 + (il%2)*16;
    device const uint8_t * h = b->hmask + (il%2)*16;
    const short shift = 2*((il%8)/2);
    const short hbit = il/2;
    float4x4 t;
    for (short i = 0; i < 16; i++) {
        const int v = int((q[i] >> shift) & 3) - (((h[i] >> hbit) & 1) ? 0 : 4);
        t[i/4][i%4] = float(v);
    }
    out = T4x4(t*dl);
}

// common_scale_min_k4 is ggml's get_scale_min_k4: scale and min j of the 8
// 6-bit pairs packed in 12 bytes (Q4_K, Q5_K).
inline uchar2 common_scale_min_k4(device const uint8_t * q, short j) {
    if (j < 4) {
        return uchar2(uchar(q[j] & 63), uchar(q[j + 4] & 63));
    }
    return uchar2(uchar((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4)), uchar((q[j + 4] >> 4) | ((q[j] >> 6) << 4)));
}

template <typename T4x4>
void dequant16_q4_k(device const block_q4_k * b, short il, thread T4x4 & out) {
    // il/4 is the 64-element chunk, (il%4)/2 its low or high nibbles.
    const short is = 2*(il/4) + (il%4)/2;
    const uchar2 sm = common_scale_min_k4(b->scales, is);
    const float dl = float(b->d)*float(sm.x);
    const float ml = float(b->dmin)*float(sm.y);
    device const ushort * q = (device const ushort *) (b->qs + 32*(il/4) + 16*(il%2));
    const short shift = 4*((il%4)/2);
    float4x4 t;
    for (short i = 0; i < 8; i++) {
        const ushort v = q[i] >> shift;
        t[i/2][2*(i%2) + 0] = dl*float(v & 15) - ml;
        t[i/2][2*(i%2) + 1] = dl*float((v >> 8) & 15) - ml;
    }
    out = T4x4(t);
}

template <typename T4x4>
void dequant16_q5_k(device const block_q5_k * b, short il, thread T4x4 & out) {
    const short is = 2*(il/4) + (il%4)/2;
    const uchar2 sm = common_scale_min_k4(b->scales, is);
    const float dl = float(b->d)*float(sm.x);
    const float ml = float(b->dmin)*float(sm.y);
    device const uint8_t * q = b->qs + 32*(il/4) + 16*(il%2);
    device const uint8_t * h = b->qh + 16*(il%2);
    const short shift = 4*((il%4)/2);
    float4x4 t;
    for (short i = 0; i < 16; i++) {
        const int v = ((q[i] >> shift) & 15) | ((h[i] >> is) & 1) << 4;
        t[i/4][i%4] = dl*float(v) - ml;
    }
    out = T4x4(t);
}

template <typename T4x4>
void dequant16_q6_k(device const block_q6_k * b, short il, thread T4x4 & out) {
    // Half il/8 of the block; within it k = (il%8)/2 picks ql's quarter
    // (k%2), its nibble (k/2) and qh's bit pair (k); the scale is il's own.
    const float dl = float(b->d)*float(b->scales[il]);
    const short k = (il%8)/2;
    device const ushort * ql = (device const ushort *) (b->ql + 64*(il/8) + 32*(k%2) + 16*(il%2));
    device const ushort * qh = (device const ushort *) (b->qh + 32*(il/8) + 16*(il%2));
    const short lshift = 4*(k/2);
    const short hshift = 2*k;
    float4x4 t;
    for (short i = 0; i < 8; i++) {
        const ushort l = ql[i] >> lshift;
        const ushort h = qh[i] >> hshift;
        t[i/2][2*(i%2) + 0] = float(short((l & 15) | (h & 3) << 4) - 32);
        t[i/2][2*(i%2) + 1] = float(short(((l >> 8) & 15) | ((h >> 8) & 3) << 4) - 32);
    }
    out = T4x4(t*dl);
}

// ---- traits ----

template <typename B> struct weight_traits;

template <> struct weight_traits<block_f32> {
    enum : short { qk = 16, nl = 1 };
    template <typename T4x4>
    static void dequant16(device const block_f32 * b, short il, thread T4x4 & out) { dequant16_f32(b, il, out); }
};

template <> struct weight_traits<block_f16> {
    enum : short { qk = 16, nl = 1 };
    template <typename T4x4>
    static void dequant16(device const block_f16 * b, short il, thread T4x4 & out) { dequant16_f16(b, il, out); }
};

template <> struct weight_traits<block_bf16> {
    enum : short { qk = 16, nl = 1 };
    template <typename T4x4>
    static void dequant16(device const block_bf16 * b, short il, thread T4x4 & out) { dequant16_bf16(b, il, out); }
};

template <> struct weight_traits<block_q4_0> {
    enum : short { qk = 32, nl = 2 };
    template <typename T4x4>
    static void dequant16(device const block_q4_0 * b, short il, thread T4x4 & out) { dequant16_q4_0(b, il, out); }
};

template <> struct weight_traits<block_q4_1> {
    enum : short { qk = 32, nl = 2 };
    template <typename T4x4>
    static void dequant16(device const block_q4_1 * b, short il, thread T4x4 & out) { dequant16_q4_1(b, il, out); }
};

template <> struct weight_traits<block_q5_0> {
    enum : short { qk = 32, nl = 2 };
    template <typename T4x4>
    static void dequant16(device const block_q5_0 * b, short il, thread T4x4 & out) { dequant16_q5_0(b, il, out); }
};

template <> struct weight_traits<block_q5_1> {
    enum : short { qk = 32, nl = 2 };
    template <typename T4x4>
    static void dequant16(device const block_q5_1 * b, short il, thread T4x4 & out) { dequant16_q5_1(b, il, out); }
};

template <> struct weight_traits<block_q8_0> {
    enum : short { qk = 32, nl = 2 };
    template <typename T4x4>
    static void dequant16(device const block_q8_0 * b, short il, thread T4x4 & out) { dequant16_q8_0(b, il, out); }
};

template <> struct weight_traits<block_mxfp4> {
    enum : short { qk = 32, nl = 2 };
    template <typename T4x4>
    static void dequant16(device const block_mxfp4 * b, short il, thread T4x4 & out) { dequant16_mxfp4(b, il, out); }
};

template <> struct weight_traits<block_q2_k> {
    enum : short { qk = 256, nl = 16 };
    template <typename T4x4>
    static void dequant16(device const block_q2_k * b, short il, thread T4x4 & out) { dequant16_q2_k(b, il, out); }
};

template <> struct weight_traits<block_q3_k> {
    enum : short { qk = 256, nl = 16 };
    template <typename T4x4>
    static void dequant16(device const block_q3_k * b, short il, thread T4x4 & out) { dequant16_q3_k(b, il, out); }
};

template <> struct weight_traits<block_q4_k> {
    enum : short { qk = 256, nl = 16 };
    template <typename T4x4>
    static void dequant16(device const block_q4_k * b, short il, thread T4x4 & out) { dequant16_q4_k(b, il, out); }
};

template <> struct weight_traits<block_q5_k> {
    enum : short { qk = 256, nl = 16 };
    template <typename T4x4>
    static void dequant16(device const block_q5_k * b, short il, thread T4x4 & out) { dequant16_q5_k(b, il, out); }
};

template <> struct weight_traits<block_q6_k> {
    enum : short { qk = 256, nl = 16 };
    template <typename T4x4>
    static void dequant16(device const block_q6_k * b, short il, thread T4x4 & out) { dequant16_q6_k(b, il, out); }
};

// rope.metal's angle, here because kv_append.metal (RoPE fused into the
// store) comes before rope.metal in the program.
// rope_angle returns p·(hi + lo) mod 2π, in [-π, π] up to rounding.
inline float rope_angle(float p, float2 f) {
    // 2π = C1 + C2 + C3 (each the float nearest to what is left).
    const float C1 = 6.28318548202514648438f;
    const float C2 = -1.74845553146951715461e-07f;
    const float C3 = -6.86049804002352750e-15f;
    const float a = p*f.x;
    const float e = fma(p, f.x, -a); // exact: a + e = p·hi
    const float k = rint(a*0.15915494309189533577f);
    // a and k·C1 are multiples of C1's ulp (2^-21) once a >= 4, and their
    // difference is within π: exact.
    float r = fma(-k, C1, a);
    r = fma(-k, C2, r);
    return r + (fma(p, f.y, e) - k*C3);
}
