// The per-thread kernel_mul_mm that the simdgroup-matrix one in
// metal/shaders/mul_mm.metal replaced, kept for run.sh prefill's comparison
// (TestExportMatrix translates the shaders with this file instead).
// kernel_mul_mm_<type>: dst[r][o] = Σ_c W[o][c]·x[r][c] for r < rows,
// o < W's rows (mat-mat, prefill batches). W is in its GGUF type, x and dst
// are f32.
//
// Tiling (the design of llama.cpp's kernel_mul_mm, with plain per-thread
// accumulators): a threadgroup of 128 threads computes a tile of 64 outputs
// × 32 batch rows. For each step of 32 columns it dequantizes the 64×32 tile
// of W into threadgroup memory (half for F16, which is exact there; float
// for every other type: a dequantized code d·q needs more than half's 11
// bits, and rounding it cost 2e-4 of each product), copies the 32×32 tile of x (float: activations can exceed
// half's range), and each thread accumulates a 4×4 block of dst in
// registers from the two tiles. Both tiles are stored column-major ([k][o],
// [k][r]) so that the inner loop reads one 4-vector of each per column.
//
// simdgroup_matrix (8×8 tiles multiplied by the simdgroup) is the faster
// path on Apple GPUs; the emulator does not have it yet, so that is for the
// darwin layer's tuning later. This kernel is the portable one.
//
// Grid: (ceil(rows/32), ceil(W rows/64)), 128 threads. Consecutive
// threadgroups share a W tile (read from cache after the first), as W is
// the large operand. cols must be a multiple of 32 and x rows 16-byte
// aligned (read as float4); dst is written as floats.
#include <metal_stdlib>
using namespace metal;

struct mul_mm_args {
    uint  cols;     // W's columns = x's row length, a multiple of 32
    uint  outs;     // W's rows = dst's row length
    uint  rows;     // batch rows of x and dst
    uint  w_stride; // bytes between rows of W
    uint  x_stride; // bytes between rows of x
    uint  d_stride; // bytes between rows of dst
};

constant constexpr short MM_NO = 64;  // outputs (W rows) per threadgroup
constant constexpr short MM_NR = 32;  // batch rows per threadgroup
constant constexpr short MM_NK = 32;  // columns per step
constant constexpr short MM_THREADS = 128;

// The load and compute mappings below assume these.
static_assert(MM_THREADS == 2*MM_NO && MM_THREADS == MM_NR*MM_NK/8 && MM_THREADS == (MM_NO/4)*(MM_NR/4), "mul_mm tiling");

// mm_tile accumulates one threadgroup's tile: acc[i][j] (this thread's
// 4×4 block) = Σ_c W[o0 + co + j][c]·x[cr + i][c], over cols columns. The
// thread loads 16 columns (chunk lh) of its W row, wrow (w_in false: past
// the last output, zeros), and 8 columns (from lk) of its x row, xrow
// (x_in false: zeros). TW is the threadgroup element type of the W tile
// (half for F16, float otherwise), TW4x4 its 4x4 matrix, B the weight
// format's block (common.metal's weight_traits give its dequantizer).
template <typename TW, typename TW4x4, typename B>
inline void mm_tile(
        threadgroup TW    * sw, // [k][o], MM_NK·MM_NO
        threadgroup float * sx, // [k][r], MM_NK·MM_NR
        uint cols,
        device const B      * wrow, bool w_in,
        device const float4 * xrow, bool x_in,
        ushort tid,
        thread float * acc) {   // [4][4]: rows cr..cr+3, outputs co..co+3
    const short lo = tid % MM_NO;
    const short lh = tid / MM_NO;            // 0, 1
    const short lr = tid % MM_NR;
    const short lk = (tid / MM_NR) * 8;      // 0, 8, 16, 24
    const short co = (tid % (MM_NO/4)) * 4;
    const short cr = (tid / (MM_NO/4)) * 4;

    constexpr short NL = weight_traits<B>::nl;

    for (short i = 0; i < 16; ++i) {
        acc[i] = 0.0f;
    }

    for (uint k0 = 0; k0 < cols; k0 += MM_NK) {
        // Load the tiles. Chunk c of the row is 16 columns from k0 + 16·lh.
        {
            const uint c = k0/16 + lh;
            TW4x4 t;
            if (w_in) {
                weight_traits<B>::dequant16(wrow + c/NL, (short) (c%NL), t);
            } else {
                t = TW4x4(0);
            }
            for (short i = 0; i < 16; ++i) {
                sw[(lh*16 + i)*MM_NO + lo] = t[i/4][i%4];
            }
        }
        {
            float4 a = 0.f, b = 0.f;
            if (x_in) {
                a = xrow[(k0 + lk)/4];
                b = xrow[(k0 + lk)/4 + 1];
            }
            for (short i = 0; i < 4; ++i) {
                sx[(lk + i)*MM_NR + lr]     = a[i];
                sx[(lk + 4 + i)*MM_NR + lr] = b[i];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        threadgroup const TW    * pw = sw + co;
        threadgroup const float * px = sx + cr;
        for (short k = 0; k < MM_NK; ++k) {
            const float4 vw = float4(*(threadgroup const vec<TW, 4> *) (pw + k*MM_NO));
            const float4 vx = *(threadgroup const float4 *) (px + k*MM_NR);
            for (short i = 0; i < 4; ++i) {
                for (short j = 0; j < 4; ++j) {
                    acc[4*i + j] = fma(vw[j], vx[i], acc[4*i + j]);
                }
            }
        }
        // The next step overwrites the tiles.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

template <typename TW, typename TW4x4, typename B>
kernel void kernel_mul_mm(
        constant mul_mm_args & args [[buffer(0)]],
        device const char    * w    [[buffer(1)]],
        device const char    * x    [[buffer(2)]],
        device       char    * dst  [[buffer(3)]],
        uint3  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    threadgroup TW    sw[MM_NK*MM_NO]; // [k][o]
    threadgroup float sx[MM_NK*MM_NR]; // [k][r]

    const uint r0 = tg.x*MM_NR;
    const uint o0 = tg.y*MM_NO;

    // What this thread loads: W row o0 + lo and x row r0 + lr.
    // Consecutive threads take consecutive rows, so the transposed stores
    // hit consecutive threadgroup addresses.
    const short lo = tid % MM_NO;
    const short lr = tid % MM_NR;
    const bool  w_in = o0 + lo < args.outs;
    const bool  x_in = r0 + lr < args.rows;
    device const B      * wrow = (device const B      *) (w + (ulong) (w_in ? o0 + lo : 0)*args.w_stride);
    device const float4 * xrow = (device const float4 *) (x + (ulong) (x_in ? r0 + lr : 0)*args.x_stride);

    float acc[16];
    mm_tile<TW, TW4x4, B>(sw, sx, args.cols, wrow, w_in, xrow, x_in, tid, acc);

    // What this thread computed: outputs o0 + co..co+3 of rows r0 + cr..cr+3.
    const short co = (tid % (MM_NO/4)) * 4;
    const short cr = (tid / (MM_NO/4)) * 4;
    for (short i = 0; i < 4; ++i) {
        const uint r = r0 + cr + i;
        if (r >= args.rows) {
            break;
        }
        device float * d = (device float *) (dst + (ulong) r*args.d_stride);
        for (short j = 0; j < 4; ++j) {
            if (o0 + co + j < args.outs) {
                d[o0 + co + j] = acc[4*i + j];
            }
        }
    }
}

typedef decltype(kernel_mul_mm<half, half4x4, block_f16>) mul_mm_t;

// Only F16 weights are exact in a half tile; the rest keep float (8 KiB of
// W tile instead of 4).
template [[host_name("kernel_mul_mm_f32")]]  kernel mul_mm_t kernel_mul_mm<float, float4x4, block_f32>;
template [[host_name("kernel_mul_mm_f16")]]  kernel mul_mm_t kernel_mul_mm<half,  half4x4,  block_f16>;
template [[host_name("kernel_mul_mm_bf16")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_bf16>;
template [[host_name("kernel_mul_mm_q4_0")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q4_0>;
template [[host_name("kernel_mul_mm_q4_1")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q4_1>;
template [[host_name("kernel_mul_mm_q5_0")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q5_0>;
template [[host_name("kernel_mul_mm_q5_1")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q5_1>;
template [[host_name("kernel_mul_mm_q8_0")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q8_0>;
template [[host_name("kernel_mul_mm_mxfp4")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_mxfp4>;
template [[host_name("kernel_mul_mm_q2_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q2_k>;
template [[host_name("kernel_mul_mm_q3_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q3_k>;
template [[host_name("kernel_mul_mm_q4_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q4_k>;
template [[host_name("kernel_mul_mm_q5_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q5_k>;
template [[host_name("kernel_mul_mm_q6_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q6_k>;

// The mixture-of-experts mat-mat product of a prefill batch, grouped by
// expert so that each chosen expert's weights are read once per batch (per
// 32 of its slots), after llama.cpp's Metal design (a map pass, then the
// tiles per expert).
//
// kernel_mul_mm_id_map_f32 lists, for each expert e, the slots s < slots
// whose id is e, in ascending order: list[e·rows + i], count[e]. One
// thread per expert scans the ids (a few thousand floats, from cache). A
// token's k slots name k different experts (the router's), so an expert
// has at most rows slots; more (ids that break that) are dropped.
//
// Grid: (ceil(experts/threads)), any threads.
struct mul_mm_id_map_args {
    uint experts; // experts in W
    uint slots;   // slots (ids)
    uint rows;    // capacity of each expert's list: the batch's rows
};

kernel void kernel_mul_mm_id_map_f32(
        constant mul_mm_id_map_args & args  [[buffer(0)]],
        device const float          * ids   [[buffer(1)]],
        device       uint           * count [[buffer(2)]],
        device       uint           * list  [[buffer(3)]],
        uint e [[thread_position_in_grid]]) {
    if (e >= args.experts) {
        return;
    }
    device uint * l = list + (ulong) e*args.rows;
    uint n = 0;
    for (uint s = 0; s < args.slots; s++) {
        if (uint(clamp(ids[s], 0.0f, float(args.experts - 1))) == e && n < args.rows) {
            l[n++] = s;
        }
    }
    count[e] = n;
}

// kernel_mul_mm_id_<type>: dst[s] = W_e·x[s/k] (x_per_slot: x[s]) for the
// slots the map listed for expert e (grid z), with kernel_mul_mm's tiles:
// a threadgroup computes 64 outputs of 32 of the expert's slots; those
// past its count return at once (uniformly: the whole threadgroup).
//
// Grid: (ceil(rows/32), ceil(outs/64), experts), 128 threads.
struct mul_mm_id_args {
    uint  cols;          // W's columns = x's row length, a multiple of 32
    uint  outs;          // rows of one expert's matrix = dst's row length
    uint  rows;          // rows of x: each expert's list capacity
    uint  k;             // slots per row of x
    uint  x_per_slot;    // 1: one x row per slot, 0: one per k slots
    uint  w_stride;      // bytes between rows of W
    ulong expert_stride; // bytes between experts' matrices
    uint  x_stride;      // bytes between rows of x
    uint  d_stride;      // bytes between rows of dst (one per slot)
};

template <typename TW, typename TW4x4, typename B>
kernel void kernel_mul_mm_id(
        constant mul_mm_id_args & args  [[buffer(0)]],
        device const char       * w     [[buffer(1)]],
        device const char       * x     [[buffer(2)]],
        device const uint       * count [[buffer(3)]],
        device const uint       * list  [[buffer(4)]],
        device       char       * dst   [[buffer(5)]],
        uint3  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    threadgroup TW    sw[MM_NK*MM_NO]; // [k][o]
    threadgroup float sx[MM_NK*MM_NR]; // [k][r]

    const uint e  = tg.z;
    const uint n  = count[e];
    const uint r0 = tg.x*MM_NR;
    if (r0 >= n) {
        return;
    }
    const uint o0 = tg.y*MM_NO;
    device const uint * slots = list + (ulong) e*args.rows;

    const short lo = tid % MM_NO;
    const short lr = tid % MM_NR;
    const bool  w_in = o0 + lo < args.outs;
    const bool  x_in = r0 + lr < n;
    const uint  s    = x_in ? slots[r0 + lr] : 0;
    device const B      * wrow = (device const B      *) (w + (ulong) e*args.expert_stride + (ulong) (w_in ? o0 + lo : 0)*args.w_stride);
    device const float4 * xrow = (device const float4 *) (x + (ulong) (args.x_per_slot ? s : s/args.k)*args.x_stride);

    float acc[16];
    mm_tile<TW, TW4x4, B>(sw, sx, args.cols, wrow, w_in, xrow, x_in, tid, acc);

    const short co = (tid % (MM_NO/4)) * 4;
    const short cr = (tid / (MM_NO/4)) * 4;
    for (short i = 0; i < 4; ++i) {
        if (r0 + cr + i >= n) {
            break;
        }
        device float * d = (device float *) (dst + (ulong) slots[r0 + cr + i]*args.d_stride);
        for (short j = 0; j < 4; ++j) {
            if (o0 + co + j < args.outs) {
                d[o0 + co + j] = acc[4*i + j];
            }
        }
    }
}

typedef decltype(kernel_mul_mm_id<half, half4x4, block_f16>) mul_mm_id_t;

template [[host_name("kernel_mul_mm_id_f32")]]   kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_f32>;
template [[host_name("kernel_mul_mm_id_f16")]]   kernel mul_mm_id_t kernel_mul_mm_id<half,  half4x4,  block_f16>;
template [[host_name("kernel_mul_mm_id_bf16")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_bf16>;
template [[host_name("kernel_mul_mm_id_q4_0")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q4_0>;
template [[host_name("kernel_mul_mm_id_q4_1")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q4_1>;
template [[host_name("kernel_mul_mm_id_q5_0")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q5_0>;
template [[host_name("kernel_mul_mm_id_q5_1")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q5_1>;
template [[host_name("kernel_mul_mm_id_q8_0")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q8_0>;
template [[host_name("kernel_mul_mm_id_mxfp4")]] kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_mxfp4>;
template [[host_name("kernel_mul_mm_id_q2_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q2_k>;
template [[host_name("kernel_mul_mm_id_q3_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q3_k>;
template [[host_name("kernel_mul_mm_id_q4_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q4_k>;
template [[host_name("kernel_mul_mm_id_q5_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q5_k>;
template [[host_name("kernel_mul_mm_id_q6_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<float, float4x4, block_q6_k>;
