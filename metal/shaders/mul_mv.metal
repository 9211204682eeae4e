// kernel_mul_mv_<type>: dst[y][r] = W[r]·x[y] for r < rows, y < xrows, with
// W of any weight type (common.metal's blocks), x and dst f32, products and
// sums in f32. The decode matmul (xrows = 1) and small batches.
//
// Each simdgroup computes mv_shape's nr consecutive rows of W (per weight
// type) for up to FC_mul_mv_nx rows of x, so every weight chunk is decoded
// once and met by every x row of the threadgroup. The lanes stride over the
// row's 16-element chunks (mv_codes16: the codes and one affine map per
// chunk, scaled once per chunk rather than per element): neighbouring lanes
// read neighbouring chunks of W and neighbouring 64 bytes of x, and the
// chunk of x is loaded once (as float4) for the simdgroup's rows of W. Each
// lane keeps its partial sums in registers; simd_sum reduces them at the
// end (and, when split simdgroups share the rows, one barrier and a few
// floats of threadgroup memory).
//
// Grid: (ceil(rows/(nr·sets)), ceil(xrows/nx)), threads 32·sets·split
// (metal/encoder's MatVecGrid chooses sets and split).
#include <metal_stdlib>
using namespace metal;

// Rows of x per threadgroup (1..4), fixed per pipeline so that the loops
// over them unroll and decode (1) keeps no registers for the others.
constant short FC_mul_mv_nx [[function_constant(600)]];

// The RMS norm fused into the mat-vec saves a dispatch and a round trip of
// x through memory (kernel_mul_mv_norm_<type>: the template's F). With
// MV_NORM, x is the RMS norm's input and g (buffer 4, f32) its weight: the
// kernel multiplies x by g as it loads each chunk, sums x² beside the
// products (the row's chunks are all met by the split simdgroups of a set)
// and scales the sums by 1/sqrt(Σx²/cols + eps) at the end,
// W·(x·g·s) = s·W·(x·g); the mat-vecs that read one norm each redo it (a
// few floats per chunk). A separate kernel rather than a function constant:
// a decode step runs both kinds on one weight type.
#define MV_PLAIN  0
#define MV_NORM   1

// The argument struct (setBytes at buffer(0)).
struct mul_mv_args {
    uint cols;     // elements per row of W and of x, a multiple of the type's qk
    uint rows;     // rows of W (outputs per row of x)
    uint xrows;    // rows of x
    uint w_stride; // bytes between rows of W
    uint x_stride; // bytes between rows of x, a multiple of 16
    uint d_stride; // bytes between rows of dst, a multiple of 4
    uint split;    // simdgroups per set of rows, dividing its chunks (a power of two)
    float eps;     // the RMS norm's (MV_NORM)
};

// mv_codes16(b, il, q) writes the codes of elements il*16 .. il*16+15 of
// block b as floats, q[i/4][i%4], and returns the chunk's affine map (a, m):
// element i = a·q_i + m (common.metal's dequant16 is that, element by
// element). The dot product of a chunk with x is then a·(q·x) + m·Σx, with
// Σx once per chunk of x for every row of W: two operations per chunk in
// place of a scale per element.

inline float2 mv_codes16(device const block_f32 * b, short il, thread float4x4 & q) {
    device const float4 * v = (device const float4 *) b->v;
    q = float4x4(v[0], v[1], v[2], v[3]);
    return float2(1.0f, 0.0f);
}

inline float2 mv_codes16(device const block_f16 * b, short il, thread float4x4 & q) {
    device const half4 * v = (device const half4 *) b->v;
    q = float4x4(float4(v[0]), float4(v[1]), float4(v[2]), float4(v[3]));
    return float2(1.0f, 0.0f);
}

inline float2 mv_codes16(device const block_bf16 * b, short il, thread float4x4 & q) {
    device const ushort4 * v = (device const ushort4 *) b->v;
    q = float4x4(common_bf16x4(v[0]), common_bf16x4(v[1]), common_bf16x4(v[2]), common_bf16x4(v[3]));
    return float2(1.0f, 0.0f);
}

// mv_nibbles16 reads 16 bytes (2-byte aligned) as two bytes a load and
// keeps the nibble at shift (0 or 4) of each.
inline void mv_nibbles16(device const uint8_t * p, short shift, thread float4x4 & q) {
    device const ushort * u = (device const ushort *) p;
    for (short i = 0; i < 8; i++) {
        const ushort v = u[i] >> shift;
        q[i/2][2*(i%2) + 0] = float(v & 15);
        q[i/2][2*(i%2) + 1] = float((v >> 8) & 15);
    }
}

inline float2 mv_codes16(device const block_q4_0 * b, short il, thread float4x4 & q) {
    mv_nibbles16(b->qs, il*4, q);
    const float d = b->d;
    return float2(d, -8.0f*d);
}

inline float2 mv_codes16(device const block_q4_1 * b, short il, thread float4x4 & q) {
    mv_nibbles16(b->qs, il*4, q);
    return float2(b->d, b->m);
}

// mv_fifth16 adds bit 4 to each of 16 codes from 16 consecutive bits.
inline void mv_fifth16(uint bits, thread float4x4 & q) {
    for (short i = 0; i < 16; i++) {
        q[i/4][i%4] += float((bits >> i) & 1)*16.0f;
    }
}

inline float2 mv_codes16(device const block_q5_0 * b, short il, thread float4x4 & q) {
    mv_nibbles16(b->qs, il*4, q);
    mv_fifth16(common_qh32(b->qh) >> (il*16), q);
    const float d = b->d;
    return float2(d, -16.0f*d);
}

inline float2 mv_codes16(device const block_q5_1 * b, short il, thread float4x4 & q) {
    mv_nibbles16(b->qs, il*4, q);
    mv_fifth16(common_qh32(b->qh) >> (il*16), q);
    return float2(b->d, b->m);
}

inline float2 mv_codes16(device const block_q8_0 * b, short il, thread float4x4 & q) {
    device const char2 * p = (device const char2 *) (b->qs + il*16);
    for (short i = 0; i < 4; i++) {
        q[i] = float4(float2(p[2*i]), float2(p[2*i + 1]));
    }
    return float2(b->d, 0.0f);
}

// MXFP4's codes are its table's values (bytes: its blocks are 17 bytes,
// so only byte-aligned), its map the halved E8M0 scale.
inline float2 mv_codes16(device const block_mxfp4 * b, short il, thread float4x4 & q) {
    const short shift = il*4;
    for (short i = 0; i < 16; i++) {
        q[i/4][i%4] = common_kvalues_mxfp4[(b->qs[i] >> shift) & 15];
    }
    return float2(common_e8m0_half(b->e), 0.0f);
}

inline float2 mv_codes16(device const block_q2_k * b, short il, thread float4x4 & q) {
    device const ushort * u = (device const ushort *) (b->qs + (il/8)*32 + (il%2)*16);
    const short shift = 2*((il%8)/2);
    for (short i = 0; i < 8; i++) {
        const ushort v = u[i] >> shift;
        q[i/2][2*(i%2) + 0] = float(v & 3);
        q[i/2][2*(i%2) + 1] = float((v >> 8) & 3);
    }
    const uint8_t s = b->scales[il];
    return float2(float(b->d)*float(s & 15), -float(b->dmin)*float(s >> 4));
}

inline float2 mv_codes16(device const block_q3_k * b, short il, thread float4x4 & q) {
    device const ushort * u = (device const ushort *) (b->qs + (il/8)*32 + (il%2)*16);
    device const ushort * h = (device const ushort *) (b->hmask + (il%2)*16);
    const short shift = 2*((il%8)/2);
    const short hbit = il/2;
    for (short i = 0; i < 8; i++) {
        const ushort v = u[i] >> shift;
        const ushort g = h[i] >> hbit; // a clear high bit subtracts 4
        q[i/2][2*(i%2) + 0] = float(short(v & 3) - ((g & 1) ? 0 : 4));
        q[i/2][2*(i%2) + 1] = float(short((v >> 8) & 3) - (((g >> 8) & 1) ? 0 : 4));
    }
    return float2(float(b->d)*float(common_q3k_scale(b->scales, il)), 0.0f);
}

inline float2 mv_codes16(device const block_q4_k * b, short il, thread float4x4 & q) {
    const short is = 2*(il/4) + (il%4)/2;
    mv_nibbles16(b->qs + 32*(il/4) + 16*(il%2), 4*((il%4)/2), q);
    const uchar2 sm = common_scale_min_k4(b->scales, is);
    return float2(float(b->d)*float(sm.x), -float(b->dmin)*float(sm.y));
}

inline float2 mv_codes16(device const block_q5_k * b, short il, thread float4x4 & q) {
    const short is = 2*(il/4) + (il%4)/2;
    mv_nibbles16(b->qs + 32*(il/4) + 16*(il%2), 4*((il%4)/2), q);
    device const ushort * h = (device const ushort *) (b->qh + 16*(il%2));
    for (short i = 0; i < 8; i++) {
        const ushort g = h[i] >> is;
        q[i/2][2*(i%2) + 0] += float(g & 1)*16.0f;
        q[i/2][2*(i%2) + 1] += float((g >> 8) & 1)*16.0f;
    }
    const uchar2 sm = common_scale_min_k4(b->scales, is);
    return float2(float(b->d)*float(sm.x), -float(b->dmin)*float(sm.y));
}

inline float2 mv_codes16(device const block_q6_k * b, short il, thread float4x4 & q) {
    const short k = (il%8)/2;
    device const ushort * ql = (device const ushort *) (b->ql + 64*(il/8) + 32*(k%2) + 16*(il%2));
    device const ushort * qh = (device const ushort *) (b->qh + 32*(il/8) + 16*(il%2));
    const short lshift = 4*(k/2);
    const short hshift = 2*k;
    for (short i = 0; i < 8; i++) {
        const ushort l = ql[i] >> lshift;
        const ushort h = qh[i] >> hshift;
        q[i/2][2*(i%2) + 0] = float((l & 15) | (h & 3) << 4);
        q[i/2][2*(i%2) + 1] = float(((l >> 8) & 15) | ((h >> 8) & 3) << 4);
    }
    const float a = float(b->d)*float(b->scales[il]);
    return float2(a, -32.0f*a);
}

// Rows of W per simdgroup, per weight type (ggml-metal's N_R0): independent
// accumulators hide the latency of the loads and share the chunk of x; the
// types whose chunks take more registers to decode (the K-quants but Q2_K,
// Q8_0, MXFP4) keep two. metal/encoder's mulMVRowsPerSimdgroup mirrors it.
template <typename B> struct mv_shape;
template <> struct mv_shape<block_f32>    { enum : short { nr = 4 }; };
template <> struct mv_shape<block_f16>    { enum : short { nr = 4 }; };
template <> struct mv_shape<block_bf16>   { enum : short { nr = 4 }; };
template <> struct mv_shape<block_q4_0>   { enum : short { nr = 4 }; };
template <> struct mv_shape<block_q4_1>   { enum : short { nr = 4 }; };
template <> struct mv_shape<block_q5_0>   { enum : short { nr = 4 }; };
template <> struct mv_shape<block_q5_1>   { enum : short { nr = 4 }; };
template <> struct mv_shape<block_q8_0>   { enum : short { nr = 2 }; };
template <> struct mv_shape<block_mxfp4>  { enum : short { nr = 2 }; };
template <> struct mv_shape<block_q2_k>   { enum : short { nr = 4 }; };
template <> struct mv_shape<block_q3_k>   { enum : short { nr = 2 }; };
template <> struct mv_shape<block_q4_k>   { enum : short { nr = 2 }; };
template <> struct mv_shape<block_q5_k>   { enum : short { nr = 2 }; };
template <> struct mv_shape<block_q6_k>   { enum : short { nr = 2 }; };

#define MUL_MV_NR_MAX 4
#define MUL_MV_NX_MAX 4

// mv_reduce sums each of the n partial sums of a lane over its simdgroup
// and, when split simdgroups share a set of rows (each took every split-th
// run of 32 chunks), over those simdgroups through red (n floats per
// simdgroup) and one barrier. It returns whether this simdgroup writes the
// sums: all of them when split is 1, the first of each set otherwise.
inline bool mv_reduce(thread float * acc, short n, ushort sg, ushort split, ushort lane, threadgroup float * red) {
    for (short i = 0; i < n; i++) {
        acc[i] = simd_sum(acc[i]);
    }
    if (split == 1) {
        return true;
    }
    if (lane == 0) {
        for (short i = 0; i < n; i++) {
            red[sg*n + i] = acc[i];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg%split != 0) {
        return false;
    }
    for (short i = 0; i < n; i++) {
        float s = 0.0f;
        for (ushort p = 0; p < split; p++) {
            s += red[(sg + p)*n + i];
        }
        acc[i] = s;
    }
    return true;
}

// The threadgroup: sets of split simdgroups, each set on mv_shape's nr
// consecutive rows of W (sets·nr rows per threadgroup); the split
// simdgroups of a set divide the row's chunks between them (the encoder
// chooses split from the device's core count: on a GPU of many cores a
// matrix of few rows otherwise leaves most of them idle). A set past the
// last row computes on clamped rows and writes nothing (it must reach the
// barrier of mv_reduce).
template <typename B, short F>
kernel void kernel_mul_mv(
        constant mul_mv_args & args [[buffer(0)]],
        device const char    * w    [[buffer(1)]],
        device const char    * x    [[buffer(2)]],
        device       char    * dst  [[buffer(3)]],
        device const float4  * g    [[buffer(4)]], // MV_NORM: the norm's weight
        threadgroup  float   * red  [[threadgroup(0)]], // nsg·(nr + 1)·nx floats when split > 1
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    typedef weight_traits<B> W;
    const short NR = mv_shape<B>::nr;
    const short NX = FC_mul_mv_nx;
    const ushort split = ushort(args.split);

    const uint r0 = (tg.x*(nsg/split) + sg/split)*NR;
    const uint y0 = tg.y*NX;
    const uint ny = min(uint(NX), args.xrows - y0); // rows of x here, uniform

    device const B * wr[NR];
    for (short k = 0; k < NR; k++) {
        wr[k] = (device const B *) (w + (ulong) min(r0 + k, args.rows - 1)*args.w_stride);
    }
    device const float4 * xr[MUL_MV_NX_MAX];
    for (short j = 0; j < NX; j++) {
        xr[j] = (device const float4 *) (x + (ulong) (y0 + min(uint(j), ny - 1))*args.x_stride);
    }

    // acc[k*NX + j]: row k of W, row j of x; acc[NR*NX + j]: Σx² of row j
    // of x (MV_NORM).
    float acc[(MUL_MV_NR_MAX + 1)*MUL_MV_NX_MAX];
    const short nacc = NR*NX + (F == MV_NORM ? NX : 0);
    for (short i = 0; i < nacc; i++) {
        acc[i] = 0.0f;
    }

    const uint nc = args.cols/16;
    for (uint c = (sg%split)*32 + lane; c < nc; c += 32*split) {
        float4x4 xv[MUL_MV_NX_MAX];
        float    xs[MUL_MV_NX_MAX]; // Σx of the chunk, for the codes' offsets
        for (short j = 0; j < NX; j++) {
            device const float4 * xc = xr[j] + 4*c;
            xv[j] = float4x4(xc[0], xc[1], xc[2], xc[3]);
            if (F == MV_NORM) {
                acc[NR*NX + j] += dot(xv[j][0], xv[j][0]) + dot(xv[j][1], xv[j][1]) + dot(xv[j][2], xv[j][2]) + dot(xv[j][3], xv[j][3]);
                for (short i = 0; i < 4; i++) {
                    xv[j][i] *= g[4*c + i];
                }
            }
            xs[j] = dot(xv[j][0] + xv[j][1] + xv[j][2] + xv[j][3], float4(1.0f));
        }
        const uint  b  = c/W::nl; // nl is a power of two: a shift
        const short il = c%W::nl;
        for (short k = 0; k < NR; k++) {
            float4x4 q;
            const float2 am = mv_codes16(wr[k] + b, il, q);
            for (short j = 0; j < NX; j++) {
                const float qx = dot(q[0], xv[j][0]) + dot(q[1], xv[j][1]) + dot(q[2], xv[j][2]) + dot(q[3], xv[j][3]);
                acc[k*NX + j] += am.x*qx + am.y*xs[j];
            }
        }
    }

    if (!mv_reduce(acc, nacc, sg, split, lane, red) || lane != 0) {
        return;
    }
    for (short j = 0; j < NX; j++) {
        device float * d = (device float *) (dst + (ulong) (y0 + j)*args.d_stride);
        // rms_norm.metal's scale, from the same Σx² (summed in another order)
        const float s = F == MV_NORM ? 1.0f/sqrt(acc[NR*NX + j]/args.cols + args.eps) : 1.0f;
        for (short k = 0; k < NR; k++) {
            if (j < ny && r0 + k < args.rows) {
                d[r0 + k] = F == MV_NORM ? acc[k*NX + j]*s : acc[k*NX + j];
            }
        }
    }
}

typedef decltype(kernel_mul_mv<block_f32, MV_PLAIN>) mul_mv_t;

template [[host_name("kernel_mul_mv_f32")]]       kernel mul_mv_t kernel_mul_mv<block_f32, MV_PLAIN>;
template [[host_name("kernel_mul_mv_f16")]]       kernel mul_mv_t kernel_mul_mv<block_f16, MV_PLAIN>;
template [[host_name("kernel_mul_mv_bf16")]]      kernel mul_mv_t kernel_mul_mv<block_bf16, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q4_0")]]      kernel mul_mv_t kernel_mul_mv<block_q4_0, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q4_1")]]      kernel mul_mv_t kernel_mul_mv<block_q4_1, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q5_0")]]      kernel mul_mv_t kernel_mul_mv<block_q5_0, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q5_1")]]      kernel mul_mv_t kernel_mul_mv<block_q5_1, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q8_0")]]      kernel mul_mv_t kernel_mul_mv<block_q8_0, MV_PLAIN>;
template [[host_name("kernel_mul_mv_mxfp4")]]     kernel mul_mv_t kernel_mul_mv<block_mxfp4, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q2_k")]]      kernel mul_mv_t kernel_mul_mv<block_q2_k, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q3_k")]]      kernel mul_mv_t kernel_mul_mv<block_q3_k, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q4_k")]]      kernel mul_mv_t kernel_mul_mv<block_q4_k, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q5_k")]]      kernel mul_mv_t kernel_mul_mv<block_q5_k, MV_PLAIN>;
template [[host_name("kernel_mul_mv_q6_k")]]      kernel mul_mv_t kernel_mul_mv<block_q6_k, MV_PLAIN>;

template [[host_name("kernel_mul_mv_norm_f32")]]  kernel mul_mv_t kernel_mul_mv<block_f32, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_f16")]]  kernel mul_mv_t kernel_mul_mv<block_f16, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_bf16")]] kernel mul_mv_t kernel_mul_mv<block_bf16, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q4_0")]] kernel mul_mv_t kernel_mul_mv<block_q4_0, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q4_1")]] kernel mul_mv_t kernel_mul_mv<block_q4_1, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q5_0")]] kernel mul_mv_t kernel_mul_mv<block_q5_0, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q5_1")]] kernel mul_mv_t kernel_mul_mv<block_q5_1, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q8_0")]] kernel mul_mv_t kernel_mul_mv<block_q8_0, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_mxfp4")]] kernel mul_mv_t kernel_mul_mv<block_mxfp4, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q2_k")]] kernel mul_mv_t kernel_mul_mv<block_q2_k, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q3_k")]] kernel mul_mv_t kernel_mul_mv<block_q3_k, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q4_k")]] kernel mul_mv_t kernel_mul_mv<block_q4_k, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q5_k")]] kernel mul_mv_t kernel_mul_mv<block_q5_k, MV_NORM>;
template [[host_name("kernel_mul_mv_norm_q6_k")]] kernel mul_mv_t kernel_mul_mv<block_q6_k, MV_NORM>;

// kernel_mul_mv_id_<type>: the mixture-of-experts mat-vec,
// dst[s] = W_e·x[s/k] (x_per_slot: x[s]) with e = ids[s], for the slots
// s < slots (grid y). W stacks the experts' matrices of rows rows each
// (expert_stride bytes apart); ids are floats (backend.Experts). Only the
// chosen experts' rows are read. The threadgroup's layout is
// kernel_mul_mv's with one row of x; an id outside [0, experts) is read
// as the last expert (no read outside W; the router never writes one).
//
// Grid: (ceil(rows/(nr·sets)), slots), threads 32·sets·split, as
// kernel_mul_mv's.
struct mul_mv_id_args {
    uint  cols;          // elements per row of W and of x
    uint  rows;          // rows of one expert's matrix
    uint  experts;       // matrices in W
    uint  k;             // slots per row of x (x_per_slot = 0)
    uint  x_per_slot;    // 1: one x row per slot, 0: one per k slots
    uint  w_stride;      // bytes between rows of W
    ulong expert_stride; // bytes between experts' matrices
    uint  x_stride;      // bytes between rows of x, a multiple of 16
    uint  d_stride;      // bytes between rows of dst (one per slot)
    uint  split;         // simdgroups per set of rows (kernel_mul_mv's)
};

template <typename B>
kernel void kernel_mul_mv_id(
        constant mul_mv_id_args & args [[buffer(0)]],
        device const char       * w    [[buffer(1)]],
        device const char       * x    [[buffer(2)]],
        device const float      * ids  [[buffer(3)]],
        device       char       * dst  [[buffer(4)]],
        threadgroup  float      * red  [[threadgroup(0)]], // nsg·nr floats when split > 1
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    typedef weight_traits<B> W;
    const short NR = mv_shape<B>::nr;
    const ushort split = ushort(args.split);

    const uint r0 = (tg.x*(nsg/split) + sg/split)*NR;
    const uint s = tg.y;
    const uint e = uint(clamp(ids[s], 0.0f, float(args.experts - 1)));
    device const char * we = w + (ulong) e*args.expert_stride;

    device const B * wr[NR];
    for (short k = 0; k < NR; k++) {
        wr[k] = (device const B *) (we + (ulong) min(r0 + k, args.rows - 1)*args.w_stride);
    }
    device const float4 * xr = (device const float4 *) (x + (ulong) (args.x_per_slot ? s : s/args.k)*args.x_stride);

    float acc[MUL_MV_NR_MAX];
    for (short k = 0; k < NR; k++) {
        acc[k] = 0.0f;
    }
    const uint nc = args.cols/16;
    for (uint c = (sg%split)*32 + lane; c < nc; c += 32*split) {
        device const float4 * xc = xr + 4*c;
        const float4x4 xv = float4x4(xc[0], xc[1], xc[2], xc[3]);
        const float xs = dot(xv[0] + xv[1] + xv[2] + xv[3], float4(1.0f));
        const uint  b  = c/W::nl;
        const short il = c%W::nl;
        for (short k = 0; k < NR; k++) {
            float4x4 q;
            const float2 am = mv_codes16(wr[k] + b, il, q);
            const float qx = dot(q[0], xv[0]) + dot(q[1], xv[1]) + dot(q[2], xv[2]) + dot(q[3], xv[3]);
            acc[k] += am.x*qx + am.y*xs;
        }
    }

    if (!mv_reduce(acc, NR, sg, split, lane, red) || lane != 0) {
        return;
    }
    device float * d = (device float *) (dst + (ulong) s*args.d_stride);
    for (short k = 0; k < NR; k++) {
        if (r0 + k < args.rows) {
            d[r0 + k] = acc[k];
        }
    }
}

typedef decltype(kernel_mul_mv_id<block_f32>) mul_mv_id_t;

template [[host_name("kernel_mul_mv_id_f32")]]   kernel mul_mv_id_t kernel_mul_mv_id<block_f32>;
template [[host_name("kernel_mul_mv_id_f16")]]   kernel mul_mv_id_t kernel_mul_mv_id<block_f16>;
template [[host_name("kernel_mul_mv_id_bf16")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_bf16>;
template [[host_name("kernel_mul_mv_id_q4_0")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q4_0>;
template [[host_name("kernel_mul_mv_id_q4_1")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q4_1>;
template [[host_name("kernel_mul_mv_id_q5_0")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q5_0>;
template [[host_name("kernel_mul_mv_id_q5_1")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q5_1>;
template [[host_name("kernel_mul_mv_id_q8_0")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q8_0>;
template [[host_name("kernel_mul_mv_id_mxfp4")]] kernel mul_mv_id_t kernel_mul_mv_id<block_mxfp4>;
template [[host_name("kernel_mul_mv_id_q2_k")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q2_k>;
template [[host_name("kernel_mul_mv_id_q3_k")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q3_k>;
template [[host_name("kernel_mul_mv_id_q4_k")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q4_k>;
template [[host_name("kernel_mul_mv_id_q5_k")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q5_k>;
template [[host_name("kernel_mul_mv_id_q6_k")]]  kernel mul_mv_id_t kernel_mul_mv_id<block_q6_k>;
