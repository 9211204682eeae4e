// kernel_get_rows_<type>: y[r] = dequantize(table[ids[r]]), as f32. The
// embedding lookup. Grid (rows, ceil(n/4/threads)); each thread writes four
// elements.
#include <metal_stdlib>
using namespace metal;

// The argument struct (setBytes at buffer(0)).
struct get_rows_args {
    uint n;          // elements per row, a multiple of 4 (of 32 for quantized types)
    uint src_stride; // bytes between rows of the table
    uint dst_stride; // bytes between rows of y
};

// GGUF's Q8_0 block: 32 int8 codes and their fp16 scale.
struct block_q8_0 {
    half   d;
    int8_t qs[32];
};

// load4 returns elements i..i+3 of a row as floats.
inline float4 load4(device const float * row, uint i) {
    return *(device const float4 *) (row + i);
}

inline float4 load4(device const half * row, uint i) {
    return float4(*(device const half4 *) (row + i));
}

inline float4 load4(device const block_q8_0 * row, uint i) {
    device const block_q8_0 & b = row[i/32];
    const uint j = i%32;
    return float4(b.qs[j], b.qs[j + 1], b.qs[j + 2], b.qs[j + 3])*float(b.d);
}

template <typename T>
kernel void kernel_get_rows(
        constant get_rows_args & args [[buffer(0)]],
        device const char      * src  [[buffer(1)]],
        device const int       * ids  [[buffer(2)]],
        device       char      * dst  [[buffer(3)]],
        uint3 tg  [[threadgroup_position_in_grid]],
        uint  tid [[thread_index_in_threadgroup]],
        uint  ntg [[threads_per_threadgroup]]) {
    const uint r = tg.x;
    const uint i = (tg.y*ntg + tid)*4;
    if (i >= args.n) {
        return;
    }
    device const T * row = (device const T *) (src + (ulong) ids[r]*args.src_stride);
    device float4  * y   = (device float4  *) (dst + (ulong) r*args.dst_stride);
    y[i/4] = load4(row, i);
}

typedef decltype(kernel_get_rows<float>) get_rows_t;

template [[host_name("kernel_get_rows_f32")]]  kernel get_rows_t kernel_get_rows<float>;
template [[host_name("kernel_get_rows_f16")]]  kernel get_rows_t kernel_get_rows<half>;
template [[host_name("kernel_get_rows_q8_0")]] kernel get_rows_t kernel_get_rows<block_q8_0>;
