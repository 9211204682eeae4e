// kernel_mul_mm_<type>: dst[r][o] = Σ_c W[o][c]·x[r][c] for r < rows,
// o < W's rows (mat-mat, prefill batches). W is in its GGUF type, x and dst
// are f32.
//
// Tiling (the design of llama.cpp's kernel_mul_mm): a threadgroup of 128
// threads (4 simdgroups) computes a tile of 64 outputs × 32 batch rows. For
// each step of 32 columns it dequantizes the 64×32 tile of W into
// threadgroup memory as half and copies the 32×32 tile of x as half (F32
// weights excepted: their tiles stay float, as the backend contract holds
// F32 products to float accuracy), as llama.cpp's Metal kernel does in its
// recent versions: the matrix units multiply half operands at full rate (the
// H200's tensor cores through the CUDA shim; float 8×8 products have no such
// path), and half×half is exact in float, so only the two roundings to half
// are new error (2^-11 of each weight and activation, finer than the CPU's
// q8 activations). A weight or activation beyond half's range (65504)
// becomes infinite, as in llama.cpp. Both tiles are stored column-major
// ([k][o], [k][r]). Each simdgroup multiplies them with the matrix units:
// its 16 rows × 32 outputs are 2×4 simdgroup_float8x8 accumulators, and each
// 8 columns it loads 2 simdgroup_half8x8 blocks of x (transposed from
// [k][r]) and 4 of W^T ([k][o] as it is) and runs 8
// simdgroup_multiply_accumulate. Their fma chain over k (metal/README.md,
// "Simdgroup matrices") makes every output the float sum, in order over c,
// of the exact products of the half operands: the Go twins compute exactly
// that. At the end the accumulators go through threadgroup memory to dst
// (only the rows and outputs inside it).
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
// Elements of padding after each k row of the W and x tiles: with it the
// 8×8 loads of a simdgroup spread over the threadgroup memory banks.
constant constexpr short MM_PAD = 8;
constant constexpr short MM_SW = MM_NO + MM_PAD; // row stride of the W tile
constant constexpr short MM_SX = MM_NR + MM_PAD; // row stride of the x tile

// The load and compute mappings below assume these.
static_assert(MM_THREADS == 2*MM_NO && MM_THREADS == MM_NR*MM_NK/8 && MM_THREADS/32 == (MM_NR/16)*(MM_NO/32), "mul_mm tiling");

// The tiles' vector and 4x4 types for their element type.
template <typename T> struct mm_types;
template <> struct mm_types<half>  { typedef half4  t4; typedef half4x4  t4x4; };
template <> struct mm_types<float> { typedef float4 t4; typedef float4x4 t4x4; };

// mm_tile computes one threadgroup's tile into so ([r][o], MM_NR×MM_NO
// floats): so[r][o] = Σ_c W[o0 + o][c]·x[r0 + r][c] over cols columns. The
// thread loads 16 columns (chunk lh) of its W row, wrow (w_in false: past
// the last output, zeros), and 8 columns (from lk) of its x row, xrow
// (x_in false: zeros). Simdgroup sg computes rows 16·(sg/2).. and outputs
// 32·(sg%2)... B is the weight format's block (common.metal's weight_traits
// give its dequantizer), T the tiles' element type (half; float for F32).
// so is complete for every thread when it returns.
template <typename B, typename T>
inline void mm_tile(
        threadgroup T     * sw, // [k][o], MM_NK·MM_SW
        threadgroup T     * sx, // [k][r], MM_NK·MM_SX
        threadgroup float * so, // [r][o], MM_NR·MM_NO
        uint cols,
        device const B      * wrow, bool w_in,
        device const float4 * xrow, bool x_in,
        ushort tid, ushort sg) {
    const short lo = tid % MM_NO;
    const short lh = tid / MM_NO;            // 0, 1
    const short lr = tid % MM_NR;
    const short lk = (tid / MM_NR) * 8;      // 0, 8, 16, 24
    const short mr = (sg / 2) * 16;          // this simdgroup's rows
    const short mo = (sg % 2) * 32;          // and outputs

    constexpr short NL = weight_traits<B>::nl;

    simdgroup_float8x8 mc[8];                // [2 row blocks][4 output blocks]
    for (short i = 0; i < 8; ++i) {
        mc[i] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    }

    for (uint k0 = 0; k0 < cols; k0 += MM_NK) {
        // Load the tiles. Chunk c of the row is 16 columns from k0 + 16·lh.
        {
            const uint c = k0/16 + lh;
            typename mm_types<T>::t4x4 t;
            if (w_in) {
                weight_traits<B>::dequant16(wrow + c/NL, (short) (c%NL), t);
            } else {
                t = typename mm_types<T>::t4x4(0);
            }
            for (short i = 0; i < 16; ++i) {
                sw[(lh*16 + i)*MM_SW + lo] = t[i/4][i%4];
            }
        }
        {
            typename mm_types<T>::t4 a = 0.0f, b = 0.0f;
            if (x_in) {
                a = typename mm_types<T>::t4(xrow[(k0 + lk)/4]);
                b = typename mm_types<T>::t4(xrow[(k0 + lk)/4 + 1]);
            }
            for (short i = 0; i < 4; ++i) {
                sx[(lk + i)*MM_SX + lr]     = a[i];
                sx[(lk + 4 + i)*MM_SX + lr] = b[i];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        for (short k = 0; k < MM_NK; k += 8) {
            simdgroup_matrix<T, 8, 8> mx[2]; // x[r][k]: the [k][r] tile transposed
            simdgroup_matrix<T, 8, 8> mw[4]; // W^T[k][o]
            for (short i = 0; i < 2; ++i) {
                simdgroup_load(mx[i], sx + k*MM_SX + mr + 8*i, MM_SX, 0, true);
            }
            for (short j = 0; j < 4; ++j) {
                simdgroup_load(mw[j], sw + k*MM_SW + mo + 8*j, MM_SW);
            }
            for (short i = 0; i < 2; ++i) {
                for (short j = 0; j < 4; ++j) {
                    simdgroup_multiply_accumulate(mc[4*i + j], mx[i], mw[j], mc[4*i + j]);
                }
            }
        }
        // The next step overwrites the tiles.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (short i = 0; i < 2; ++i) {
        for (short j = 0; j < 4; ++j) {
            simdgroup_store(mc[4*i + j], so + (mr + 8*i)*MM_NO + mo + 8*j, MM_NO);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
}

template <typename B, typename T>
kernel void kernel_mul_mm(
        constant mul_mm_args & args [[buffer(0)]],
        device const char    * w    [[buffer(1)]],
        device const char    * x    [[buffer(2)]],
        device       char    * dst  [[buffer(3)]],
        uint3  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort sg  [[simdgroup_index_in_threadgroup]]) {
    threadgroup T     sw[MM_NK*MM_SW]; // [k][o]
    threadgroup T     sx[MM_NK*MM_SX]; // [k][r]
    threadgroup float so[MM_NR*MM_NO]; // [r][o]

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

    mm_tile<B, T>(sw, sx, so, args.cols, wrow, w_in, xrow, x_in, tid, sg);

    // Consecutive threads write consecutive outputs of a row.
    for (short i = 0; i < MM_NR*MM_NO/MM_THREADS; ++i) {
        const short t = i*MM_THREADS + tid;
        const uint  r = r0 + t/MM_NO;
        const uint  o = o0 + t%MM_NO;
        if (r < args.rows && o < args.outs) {
            ((device float *) (dst + (ulong) r*args.d_stride))[o] = so[t];
        }
    }
}

typedef decltype(kernel_mul_mm<block_f16, half>) mul_mm_t;

template [[host_name("kernel_mul_mm_f32")]]  kernel mul_mm_t kernel_mul_mm<block_f32, float>;
template [[host_name("kernel_mul_mm_f16")]]  kernel mul_mm_t kernel_mul_mm<block_f16, half>;
template [[host_name("kernel_mul_mm_bf16")]] kernel mul_mm_t kernel_mul_mm<block_bf16, half>;
template [[host_name("kernel_mul_mm_q4_0")]] kernel mul_mm_t kernel_mul_mm<block_q4_0, half>;
template [[host_name("kernel_mul_mm_q4_1")]] kernel mul_mm_t kernel_mul_mm<block_q4_1, half>;
template [[host_name("kernel_mul_mm_q5_0")]] kernel mul_mm_t kernel_mul_mm<block_q5_0, half>;
template [[host_name("kernel_mul_mm_q5_1")]] kernel mul_mm_t kernel_mul_mm<block_q5_1, half>;
template [[host_name("kernel_mul_mm_q8_0")]] kernel mul_mm_t kernel_mul_mm<block_q8_0, half>;
template [[host_name("kernel_mul_mm_mxfp4")]] kernel mul_mm_t kernel_mul_mm<block_mxfp4, half>;
template [[host_name("kernel_mul_mm_q2_k")]] kernel mul_mm_t kernel_mul_mm<block_q2_k, half>;
template [[host_name("kernel_mul_mm_q3_k")]] kernel mul_mm_t kernel_mul_mm<block_q3_k, half>;
template [[host_name("kernel_mul_mm_q4_k")]] kernel mul_mm_t kernel_mul_mm<block_q4_k, half>;
template [[host_name("kernel_mul_mm_q5_k")]] kernel mul_mm_t kernel_mul_mm<block_q5_k, half>;
template [[host_name("kernel_mul_mm_q6_k")]] kernel mul_mm_t kernel_mul_mm<block_q6_k, half>;

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
// slots the map listed for expert e (grid z), with kernel_mul_mm's tiles
// (mm_tile, the matrix units):
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

template <typename B, typename T>
kernel void kernel_mul_mm_id(
        constant mul_mm_id_args & args  [[buffer(0)]],
        device const char       * w     [[buffer(1)]],
        device const char       * x     [[buffer(2)]],
        device const uint       * count [[buffer(3)]],
        device const uint       * list  [[buffer(4)]],
        device       char       * dst   [[buffer(5)]],
        uint3  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort sg  [[simdgroup_index_in_threadgroup]]) {
    threadgroup T     sw[MM_NK*MM_SW]; // [k][o]
    threadgroup T     sx[MM_NK*MM_SX]; // [k][r]
    threadgroup float so[MM_NR*MM_NO]; // [r][o]

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

    mm_tile<B, T>(sw, sx, so, args.cols, wrow, w_in, xrow, x_in, tid, sg);

    for (short i = 0; i < MM_NR*MM_NO/MM_THREADS; ++i) {
        const short t = i*MM_THREADS + tid;
        const uint  r = r0 + t/MM_NO;
        const uint  o = o0 + t%MM_NO;
        if (r < n && o < args.outs) {
            ((device float *) (dst + (ulong) slots[r]*args.d_stride))[o] = so[t];
        }
    }
}

typedef decltype(kernel_mul_mm_id<block_f16, half>) mul_mm_id_t;

template [[host_name("kernel_mul_mm_id_f32")]]   kernel mul_mm_id_t kernel_mul_mm_id<block_f32, float>;
template [[host_name("kernel_mul_mm_id_f16")]]   kernel mul_mm_id_t kernel_mul_mm_id<block_f16, half>;
template [[host_name("kernel_mul_mm_id_bf16")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_bf16, half>;
template [[host_name("kernel_mul_mm_id_q4_0")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q4_0, half>;
template [[host_name("kernel_mul_mm_id_q4_1")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q4_1, half>;
template [[host_name("kernel_mul_mm_id_q5_0")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q5_0, half>;
template [[host_name("kernel_mul_mm_id_q5_1")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q5_1, half>;
template [[host_name("kernel_mul_mm_id_q8_0")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q8_0, half>;
template [[host_name("kernel_mul_mm_id_mxfp4")]] kernel mul_mm_id_t kernel_mul_mm_id<block_mxfp4, half>;
template [[host_name("kernel_mul_mm_id_q2_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q2_k, half>;
template [[host_name("kernel_mul_mm_id_q3_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q3_k, half>;
template [[host_name("kernel_mul_mm_id_q4_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q4_k, half>;
template [[host_name("kernel_mul_mm_id_q5_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q5_k, half>;
template [[host_name("kernel_mul_mm_id_q6_k")]]  kernel mul_mm_id_t kernel_mul_mm_id<block_q6_k, half>;
