// kernel_get_rows_<type>: y[r] = dequantize(table[ids[r]]), as f32. The
// embedding lookup. Grid (rows, ceil(n/16/threads)); each thread writes one
// 16-element chunk (common.metal's dequant16), so neighbouring threads read
// neighbouring chunks of the row and write neighbouring 64 bytes.
#include <metal_stdlib>
using namespace metal;

// The argument struct (setBytes at buffer(0)).
struct get_rows_args {
    uint n;          // elements per row, a multiple of the type's qk
    uint src_stride; // bytes between rows of the table
    uint dst_stride; // bytes between rows of y, a multiple of 16
};

template <typename B>
kernel void kernel_get_rows(
        constant get_rows_args & args [[buffer(0)]],
        device const char      * src  [[buffer(1)]],
        device const int       * ids  [[buffer(2)]],
        device       char      * dst  [[buffer(3)]],
        uint3 tg  [[threadgroup_position_in_grid]],
        uint  tid [[thread_index_in_threadgroup]],
        uint  ntg [[threads_per_threadgroup]]) {
    typedef weight_traits<B> W;
    const uint c = tg.y*ntg + tid; // the chunk of 16
    if (c >= args.n/16) {
        return;
    }
    device const B * row = (device const B *) (src + (ulong) ids[tg.x]*args.src_stride);
    device float4  * y   = (device float4  *) (dst + (ulong) tg.x*args.dst_stride) + 4*c;
    float4x4 v;
    W::dequant16(row + c/W::nl, c%W::nl, v);
    y[0] = v[0];
    y[1] = v[1];
    y[2] = v[2];
    y[3] = v[3];
}

typedef decltype(kernel_get_rows<block_f32>) get_rows_t;

template [[host_name("kernel_get_rows_f32")]]  kernel get_rows_t kernel_get_rows<block_f32>;
template [[host_name("kernel_get_rows_f16")]]  kernel get_rows_t kernel_get_rows<block_f16>;
template [[host_name("kernel_get_rows_bf16")]] kernel get_rows_t kernel_get_rows<block_bf16>;
template [[host_name("kernel_get_rows_q4_0")]] kernel get_rows_t kernel_get_rows<block_q4_0>;
template [[host_name("kernel_get_rows_q4_1")]] kernel get_rows_t kernel_get_rows<block_q4_1>;
template [[host_name("kernel_get_rows_q5_0")]] kernel get_rows_t kernel_get_rows<block_q5_0>;
template [[host_name("kernel_get_rows_q5_1")]] kernel get_rows_t kernel_get_rows<block_q5_1>;
template [[host_name("kernel_get_rows_q8_0")]] kernel get_rows_t kernel_get_rows<block_q8_0>;
template [[host_name("kernel_get_rows_mxfp4")]] kernel get_rows_t kernel_get_rows<block_mxfp4>;
template [[host_name("kernel_get_rows_q2_k")]] kernel get_rows_t kernel_get_rows<block_q2_k>;
template [[host_name("kernel_get_rows_q3_k")]] kernel get_rows_t kernel_get_rows<block_q3_k>;
template [[host_name("kernel_get_rows_q4_k")]] kernel get_rows_t kernel_get_rows<block_q4_k>;
template [[host_name("kernel_get_rows_q5_k")]] kernel get_rows_t kernel_get_rows<block_q5_k>;
template [[host_name("kernel_get_rows_q6_k")]] kernel get_rows_t kernel_get_rows<block_q6_k>;
