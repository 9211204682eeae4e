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

// kernel_mul_mm: TW is the threadgroup element type of the W tile (half
// for F16, float otherwise), TW4x4 its 4x4 matrix, B the weight format's block
// (common.metal's weight_traits give its dequantizer).
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

    // What this thread loads: 16 columns (chunk lh) of W row o0 + lo, and
    // 8 columns (from lk) of x row r0 + lr. Consecutive threads take
    // consecutive rows, so the transposed stores hit consecutive
    // threadgroup addresses.
    const short lo = tid % MM_NO;
    const short lh = tid / MM_NO;            // 0, 1
    const short lr = tid % MM_NR;
    const short lk = (tid / MM_NR) * 8;      // 0, 8, 16, 24
    const bool  w_in = o0 + lo < args.outs;
    const bool  x_in = r0 + lr < args.rows;
    device const B      * wrow = (device const B      *) (w + (ulong) (w_in ? o0 + lo : 0)*args.w_stride);
    device const float4 * xrow = (device const float4 *) (x + (ulong) (x_in ? r0 + lr : 0)*args.x_stride);

    // What this thread computes: outputs o0 + co..co+3 of rows r0 + cr..cr+3.
    const short co = (tid % (MM_NO/4)) * 4;
    const short cr = (tid / (MM_NO/4)) * 4;

    constexpr short NL = weight_traits<B>::nl;

    float acc[4][4] = {{0.f}};

    for (uint k0 = 0; k0 < args.cols; k0 += MM_NK) {
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
                    acc[i][j] = fma(vw[j], vx[i], acc[i][j]);
                }
            }
        }
        // The next step overwrites the tiles.
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }

    for (short i = 0; i < 4; ++i) {
        const uint r = r0 + cr + i;
        if (r >= args.rows) {
            break;
        }
        device float * d = (device float *) (dst + (ulong) r*args.d_stride);
        for (short j = 0; j < 4; ++j) {
            if (o0 + co + j < args.outs) {
                d[o0 + co + j] = acc[i][j];
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
template [[host_name("kernel_mul_mm_q2_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q2_k>;
template [[host_name("kernel_mul_mm_q3_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q3_k>;
template [[host_name("kernel_mul_mm_q4_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q4_k>;
template [[host_name("kernel_mul_mm_q5_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q5_k>;
template [[host_name("kernel_mul_mm_q6_k")]] kernel mul_mm_t kernel_mul_mm<float, float4x4, block_q6_k>;
