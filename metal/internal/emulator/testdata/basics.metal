// Small kernels that exercise the emulator: each test in emulator_test.go
// names the kernel it runs.
#include <metal_stdlib>
using namespace metal;

// c = a + b, through a swizzle round trip.
kernel void vec_add(
        device const float4 * a [[buffer(0)]],
        device const float4 * b [[buffer(1)]],
        device       float4 * c [[buffer(2)]],
        constant     uint   & n [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    if (i >= n) {
        return;
    }
    float4 s = a[i] + b[i];
    float4 t;
    t.wzyx = s.wzyx;
    t.xy = float2(t.x, t.y);
    c[i] = t;
}

// A tree reduction in a [[threadgroup(0)]] argument, a barrier per step.
kernel void reduce_tree(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        threadgroup  float * buf [[threadgroup(0)]],
        uint tid [[thread_index_in_threadgroup]],
        uint n   [[threads_per_threadgroup]],
        uint g   [[threadgroup_position_in_grid]]) {
    buf[tid] = x[g*n + tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = n/2; s > 0; s >>= 1) {
        if (tid < s) {
            buf[tid] += buf[tid + s];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0) {
        out[g] = buf[0];
    }
}

// The same with simd_sum and a kernel-local threadgroup array.
kernel void reduce_simd(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        uint   tid  [[thread_index_in_threadgroup]],
        uint   n    [[threads_per_threadgroup]],
        uint   g    [[threadgroup_position_in_grid]],
        ushort lane [[thread_index_in_simdgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]]) {
    threadgroup float partial[32];
    float v = simd_sum(x[g*n + tid]);
    if (lane == 0) {
        partial[sg] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0) {
        v = simd_sum(lane < nsg ? partial[lane] : 0.0f);
        if (lane == 0) {
            out[g] = v;
        }
    }
}

// Eight simd collectives per thread.
kernel void simd_ops(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        uint   tid  [[thread_position_in_grid]],
        ushort lane [[thread_index_in_simdgroup]]) {
    float v = x[tid];
    device float * o = out + tid*8;
    o[0] = simd_sum(v);
    o[1] = simd_max(v);
    o[2] = simd_shuffle(v, (lane + 3) % 32);
    o[3] = simd_shuffle_down(v, 5);
    o[4] = simd_shuffle_xor(v, 1);
    o[5] = simd_prefix_exclusive_sum(v);
    o[6] = simd_broadcast(v, 7);
    o[7] = simd_min(v);
}

// A simd_sum after some lanes returned: only the active lanes take part.
kernel void simd_sum_active(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        constant     uint  & n   [[buffer(2)]],
        uint tid [[thread_position_in_grid]]) {
    if (tid >= n) {
        return;
    }
    out[tid] = simd_sum(x[tid]);
}

// Each thread publishes its value, then reads its left neighbour's.
kernel void shift(
        device const float * x   [[buffer(0)]],
        device       float * y   [[buffer(1)]],
        threadgroup  float * buf [[threadgroup(0)]],
        uint tid [[thread_index_in_threadgroup]]) {
    buf[tid] = x[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = tid > 0 ? buf[tid - 1] : 0.0f;
}

// Every built-in position, to check them against each other.
kernel void positions(
        device uint * out [[buffer(0)]],
        uint3  gid  [[thread_position_in_grid]],
        uint3  grid [[threads_per_grid]],
        uint3  tg   [[threadgroup_position_in_grid]],
        uint3  ntgs [[threadgroups_per_grid]],
        uint3  tp   [[thread_position_in_threadgroup]],
        uint3  ntg  [[threads_per_threadgroup]],
        uint   idx  [[thread_index_in_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]],
        ushort w    [[threads_per_simdgroup]]) {
    uint flat = gid.x + grid.x*(gid.y + grid.y*gid.z);
    device uint * o = out + flat*8;
    o[0] = gid.x; o[1] = gid.y; o[2] = gid.z;
    o[3] = tg.x*ntg.x + tp.x == gid.x && tg.y*ntg.y + tp.y == gid.y && tg.z*ntg.z + tp.z == gid.z;
    o[4] = idx == tp.x + ntg.x*(tp.y + ntg.y*tp.z);
    o[5] = sg*w + lane == idx;
    o[6] = all(ntgs*ntg == grid);
    o[7] = w;
}

// Scalar and vector types, half literals and math.
kernel void types(
        device const half4 * h   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    half4  v = h[i];
    float4 f = float4(v);
    device float * o = out + i*8;
    o[0] = f.x + f.y;
    o[1] = float(v.x * 2.0h);
    o[2] = dot(f.xyz, float3(1, 2, 3));
    o[3] = as_type<float>(as_type<uint>(f.w) ^ 0x80000000u);
    o[4] = max(f.x, 0);
    o[5] = clamp(f, -1.0f, 1.0f).y;
    o[6] = float(popcount(as_type<uint>(f.z)));
    packed_float3 p = f.xyz;
    float3 q = p;
    o[7] = q.z + float(sizeof(packed_float3)) + float(sizeof(float3));
}

// Device atomics from every thread of every threadgroup.
kernel void count(
        device atomic_uint * counter [[buffer(0)]],
        device atomic_int  * maxid   [[buffer(1)]],
        uint tid [[thread_position_in_grid]]) {
    atomic_fetch_add_explicit(counter, 1u, memory_order_relaxed);
    atomic_fetch_max_explicit(maxid, int(tid), memory_order_relaxed);
}

constant float fc_scale    [[function_constant(0)]];
constant bool  fc_has_bias [[function_constant(1)]];
constant bool  use_bias = is_function_constant_defined(fc_has_bias) && fc_has_bias;

// y = x*scale (+ 1 with the bias constant set to true).
kernel void scale_bias(
        device const float * x [[buffer(0)]],
        device       float * y [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    float v = x[i] * fc_scale;
    if (use_bias) {
        v += 1.0f;
    }
    y[i] = v;
}

// A template with host names: out = x * N.
template <typename T, int N>
kernel void times(
        device const T * x   [[buffer(0)]],
        device       T * out [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    out[i] = x[i] * T(N);
}

typedef decltype(times<float, 2>) times_t;

template [[host_name("times_f32_2")]] kernel times_t times<float, 2>;
template [[host_name("times_f16_3")]] kernel void times<half, 3>(device const half *, device half *, uint);

// Two threadgroup arguments: each must have its own memory.
kernel void two_tg_args(
        device       float * y [[buffer(0)]],
        threadgroup  float * a [[threadgroup(0)]],
        threadgroup  float * b [[threadgroup(1)]],
        uint tid [[thread_index_in_threadgroup]]) {
    a[tid] = 1.0f + tid;
    b[tid] = -1.0f - tid;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = a[tid] + 10.0f*b[(tid + 1) % 32];
}
