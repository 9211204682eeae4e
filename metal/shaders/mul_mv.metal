// kernel_mul_mv_<type>: dst[y][r] = W[r]·x[y] for r < rows, y < xrows, with
// W of any weight type (common.metal's blocks), x and dst f32, products and
// sums in f32. The decode matmul (xrows = 1) and small batches.
//
// Each simdgroup computes MUL_MV_NR consecutive rows of W for up to
// FC_mul_mv_nx rows of x, so every weight chunk is dequantized once and met
// by every x row of the threadgroup. The lanes stride over the row's
// 16-element chunks (common.metal's dequant16): neighbouring lanes read
// neighbouring chunks of W and neighbouring 64 bytes of x, and the chunk of
// x is loaded once (as float4) for the simdgroup's rows of W. Each lane
// keeps its partial sums in registers; simd_sum reduces them at the end, so
// no threadgroup memory and no barriers.
//
// Grid: (ceil(rows/(MUL_MV_NR·simdgroups)), ceil(xrows/nx)), threads
// 32·simdgroups. A simdgroup whose first row is past the end returns; the
// last one clamps its reads to the last row and writes only real rows.
#include <metal_stdlib>
using namespace metal;

// Rows of x per threadgroup (1..4), fixed per pipeline so that the loops
// over them unroll and decode (1) keeps no registers for the others.
constant short FC_mul_mv_nx [[function_constant(600)]];

// The argument struct (setBytes at buffer(0)).
struct mul_mv_args {
    uint cols;     // elements per row of W and of x, a multiple of the type's qk
    uint rows;     // rows of W (outputs per row of x)
    uint xrows;    // rows of x
    uint w_stride; // bytes between rows of W
    uint x_stride; // bytes between rows of x, a multiple of 16
    uint d_stride; // bytes between rows of dst, a multiple of 4
};

// Rows of W per simdgroup: four independent accumulators per x row hide
// the latency of the loads and share the chunk of x.
#define MUL_MV_NR 4
#define MUL_MV_NX_MAX 4

template <typename B>
kernel void kernel_mul_mv(
        constant mul_mv_args & args [[buffer(0)]],
        device const char    * w    [[buffer(1)]],
        device const char    * x    [[buffer(2)]],
        device       char    * dst  [[buffer(3)]],
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    typedef weight_traits<B> W;
    const short NX = FC_mul_mv_nx;

    const uint r0 = (tg.x*nsg + sg)*MUL_MV_NR;
    if (r0 >= args.rows) {
        return;
    }
    const uint y0 = tg.y*NX;
    const uint ny = min(uint(NX), args.xrows - y0); // rows of x here, uniform

    device const B * wr[MUL_MV_NR];
    for (short k = 0; k < MUL_MV_NR; k++) {
        wr[k] = (device const B *) (w + (ulong) min(r0 + k, args.rows - 1)*args.w_stride);
    }
    device const float4 * xr[MUL_MV_NX_MAX];
    for (short j = 0; j < NX; j++) {
        xr[j] = (device const float4 *) (x + (ulong) (y0 + min(uint(j), ny - 1))*args.x_stride);
    }

    float acc[MUL_MV_NR][MUL_MV_NX_MAX];
    for (short k = 0; k < MUL_MV_NR; k++) {
        for (short j = 0; j < NX; j++) {
            acc[k][j] = 0.0f;
        }
    }

    const uint nc = args.cols/16;
    for (uint c = lane; c < nc; c += 32) {
        float4x4 xv[MUL_MV_NX_MAX];
        for (short j = 0; j < NX; j++) {
            device const float4 * xc = xr[j] + 4*c;
            xv[j] = float4x4(xc[0], xc[1], xc[2], xc[3]);
        }
        const uint  b  = c/W::nl; // nl is a power of two: a shift
        const short il = c%W::nl;
        for (short k = 0; k < MUL_MV_NR; k++) {
            float4x4 wv;
            W::dequant16(wr[k] + b, il, wv);
            for (short j = 0; j < NX; j++) {
                acc[k][j] += dot(wv[0], xv[j][0]) + dot(wv[1], xv[j][1]) + dot(wv[2], xv[j][2]) + dot(wv[3], xv[j][3]);
            }
        }
    }

    for (short j = 0; j < NX; j++) {
        device float * d = (device float *) (dst + (ulong) (y0 + j)*args.d_stride);
        for (short k = 0; k < MUL_MV_NR; k++) {
            const float s = simd_sum(acc[k][j]);
            if (lane == 0 && j < ny && r0 + k < args.rows) {
                d[r0 + k] = s;
            }
        }
    }
}

typedef decltype(kernel_mul_mv<block_f32>) mul_mv_t;

template [[host_name("kernel_mul_mv_f32")]]  kernel mul_mv_t kernel_mul_mv<block_f32>;
template [[host_name("kernel_mul_mv_f16")]]  kernel mul_mv_t kernel_mul_mv<block_f16>;
template [[host_name("kernel_mul_mv_bf16")]] kernel mul_mv_t kernel_mul_mv<block_bf16>;
template [[host_name("kernel_mul_mv_q4_0")]] kernel mul_mv_t kernel_mul_mv<block_q4_0>;
template [[host_name("kernel_mul_mv_q4_1")]] kernel mul_mv_t kernel_mul_mv<block_q4_1>;
template [[host_name("kernel_mul_mv_q5_0")]] kernel mul_mv_t kernel_mul_mv<block_q5_0>;
template [[host_name("kernel_mul_mv_q5_1")]] kernel mul_mv_t kernel_mul_mv<block_q5_1>;
template [[host_name("kernel_mul_mv_q8_0")]] kernel mul_mv_t kernel_mul_mv<block_q8_0>;
template [[host_name("kernel_mul_mv_q2_k")]] kernel mul_mv_t kernel_mul_mv<block_q2_k>;
template [[host_name("kernel_mul_mv_q3_k")]] kernel mul_mv_t kernel_mul_mv<block_q3_k>;
template [[host_name("kernel_mul_mv_q4_k")]] kernel mul_mv_t kernel_mul_mv<block_q4_k>;
template [[host_name("kernel_mul_mv_q5_k")]] kernel mul_mv_t kernel_mul_mv<block_q5_k>;
template [[host_name("kernel_mul_mv_q6_k")]] kernel mul_mv_t kernel_mul_mv<block_q6_k>;
