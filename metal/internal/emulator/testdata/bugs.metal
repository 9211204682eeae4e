// Kernels with the bugs the emulator must catch. The tests find the lines
// they expect in the errors by the BUG markers.
#include <metal_stdlib>
using namespace metal;

// shift without its barrier: a thread may read its neighbour's slot before
// the neighbour wrote it. Right when threads run in order, NaN in reverse.
kernel void shift_missing_barrier(
        device const float * x   [[buffer(0)]],
        device       float * y   [[buffer(1)]],
        threadgroup  float * buf [[threadgroup(0)]],
        uint tid [[thread_index_in_threadgroup]]) {
    buf[tid] = x[tid];
    y[tid] = tid > 0 ? buf[tid - 1] : 0.0f;
}

// Half of each simdgroup calls simd_sum while the other half goes on to the
// barrier.
kernel void divergent_simd(
        device float * y [[buffer(0)]],
        uint   tid  [[thread_position_in_grid]],
        ushort lane [[thread_index_in_simdgroup]]) {
    float v = tid;
    if (lane < 16) {
        v = simd_sum(v); // BUG:divergent
    }
    threadgroup_barrier(mem_flags::mem_threadgroup); // BUG:divergent-other
    y[tid] = v;
}

// A barrier only some threads reach: on a GPU, a hang.
kernel void barrier_in_branch(
        device float * y [[buffer(0)]],
        uint tid [[thread_index_in_threadgroup]]) {
    if (tid < 16) {
        threadgroup_barrier(mem_flags::mem_threadgroup); // BUG:deadlock
    }
    y[tid] = tid;
}

// Two different barriers in the two branches.
kernel void two_barriers(
        device float * y [[buffer(0)]],
        uint tid [[thread_index_in_threadgroup]]) {
    if (tid % 2 == 0) {
        threadgroup_barrier(mem_flags::mem_threadgroup); // BUG:even
    } else {
        threadgroup_barrier(mem_flags::mem_threadgroup); // BUG:odd
    }
    y[tid] = tid;
}

// More threadgroup memory than an Apple GPU has.
kernel void too_much_threadgroup_memory(
        device float * y [[buffer(0)]],
        uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float big[9000]; // BUG:tgmem
    big[tid] = tid;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = big[tid];
}

// Simdgroup 0 clears the slots, then each simdgroup writes its own; the
// barrier between is missing. A simdgroup that runs ahead of simdgroup 0
// (the last one, in reverse order) has its slot cleared after it wrote it.
// The simd_sum between must not act as a barrier across simdgroups.
kernel void clear_then_write(
        device       float * y     [[buffer(0)]],
        threadgroup  float * slots [[threadgroup(0)]],
        uint   tid  [[thread_index_in_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    if (sg == 0) {
        slots[lane] = 0.0f;
    }
    float v = simd_sum(1.0f);
    if (lane == 0) {
        slots[sg] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = slots[sg];
}
