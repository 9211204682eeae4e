// kernel_rms_norm_{f32,f16}: y = x / sqrt(mean(x²) + eps) * w, row by row,
// for a weight w of f32 or f16 (GGUF norms are f32; some files store f16);
// kernel_rms_norm_plain_f32 without a weight.
// One threadgroup per row; any multiple of 32 threads up to 1024.
#include <metal_stdlib>
using namespace metal;

// The argument struct (setBytes at buffer(0)); the encoder writes the same
// layout.
struct rms_norm_args {
    uint  n;          // elements per row, a multiple of 4
    uint  src_stride; // bytes between rows of x
    uint  dst_stride; // bytes between rows of y
    float eps;
};

// rms_norm_scale is 1/sqrt(mean(x²) + eps) of one row of n4 float4s,
// summed per thread, then per simdgroup, then across simdgroups through
// sums (32 floats), which every thread of the threadgroup returns.
inline float rms_norm_scale(device const float4 * x, uint n4, uint n, float eps, threadgroup float * sums,
                            ushort tid, ushort ntg, ushort sg, ushort lane) {
    // Slots of simdgroups that do not exist must read as zero.
    if (sg == 0) {
        sums[lane] = 0.0f;
    }
    float s = 0.0f;
    for (uint i = tid; i < n4; i += ntg) {
        s += dot(x[i], x[i]);
    }
    s = simd_sum(s);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane == 0) {
        sums[sg] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    s = simd_sum(sums[lane]);
    return 1.0f/sqrt(s/n + eps);
}

template <typename W4>
kernel void kernel_rms_norm(
        constant rms_norm_args & args [[buffer(0)]],
        device const char      * src  [[buffer(1)]],
        device const W4        * w    [[buffer(2)]],
        device       char      * dst  [[buffer(3)]],
        threadgroup  float     * sums [[threadgroup(0)]], // 32 floats
        uint   row  [[threadgroup_position_in_grid]],
        ushort tid  [[thread_position_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    device const float4 * x = (device const float4 *) (src + (ulong) row*args.src_stride);
    device       float4 * y = (device       float4 *) (dst + (ulong) row*args.dst_stride);
    const uint n4 = args.n/4;
    const float scale = rms_norm_scale(x, n4, args.n, args.eps, sums, tid, ntg, sg, lane);
    for (uint i = tid; i < n4; i += ntg) {
        y[i] = x[i]*scale*float4(w[i]);
    }
}

typedef decltype(kernel_rms_norm<float4>) rms_norm_t;

template [[host_name("kernel_rms_norm_f32")]] kernel rms_norm_t kernel_rms_norm<float4>;
template [[host_name("kernel_rms_norm_f16")]] kernel rms_norm_t kernel_rms_norm<half4>;

// kernel_rms_norm_plain_f32: y = x / sqrt(mean(x²) + eps), no weight
// (Gemma 4's norm of each head of v); the same grid.
kernel void kernel_rms_norm_plain_f32(
        constant rms_norm_args & args [[buffer(0)]],
        device const char      * src  [[buffer(1)]],
        device       char      * dst  [[buffer(3)]],
        threadgroup  float     * sums [[threadgroup(0)]], // 32 floats
        uint   row  [[threadgroup_position_in_grid]],
        ushort tid  [[thread_position_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    device const float4 * x = (device const float4 *) (src + (ulong) row*args.src_stride);
    device       float4 * y = (device       float4 *) (dst + (ulong) row*args.dst_stride);
    const uint n4 = args.n/4;
    const float scale = rms_norm_scale(x, n4, args.n, args.eps, sums, tid, ntg, sg, lane);
    for (uint i = tid; i < n4; i += ntg) {
        y[i] = x[i]*scale;
    }
}
