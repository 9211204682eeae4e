// simdgroup_matrix: loads with a row stride, an origin and a transpose, from
// device and threadgroup memory; products of float and half matrices (mixed
// and plain), make_filled_simdgroup_matrix, the diagonal constructor,
// stores (transposed, to device and threadgroup memory) and
// thread_elements. TestSimdgroupMatrix compares every value with a Go
// reference. Each simdgroup of the threadgroup works on its own matrices.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

kernel void matrix_ops(
        device const float * f   [[buffer(0)]],  // per simdgroup: 16x16
        device const float * c   [[buffer(1)]],  // per simdgroup: 8x8 (threads 64)
        device const half  * fh  [[buffer(2)]],  // per simdgroup: 16x16
        device const half  * ch  [[buffer(3)]],  // per simdgroup: 8x8
        device       float * out [[buffer(4)]],  // per simdgroup: 512
        device       half  * oh  [[buffer(5)]],  // per simdgroup: 64
        ushort tid  [[thread_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]]) {
    threadgroup float tc[2*64];
    threadgroup float td[2*64];
    tc[tid] = c[tid];
    tc[tid + 64] = c[tid + 64];
    threadgroup_barrier(mem_flags::mem_threadgroup);

    device const float * F = f + sg*256;
    device       float * O = out + sg*512;
    simdgroup_float8x8 a, b, cm, d;
    simdgroup_load(a, F, 16, ulong2(3, 2));
    simdgroup_load(b, F, 16, ulong2(5, 7), true);
    simdgroup_load(cm, tc + sg*64);
    simdgroup_multiply_accumulate(d, a, b, cm);
    simdgroup_store(d, O, 10, ulong2(1, 1), true);

    simdgroup_half8x8 ah, bh, hc;
    simdgroup_load(ah, fh + sg*256, 16);
    simdgroup_load(bh, fh + sg*256 + 8, 16, 0, true);
    simdgroup_load(hc, ch + sg*64);
    simdgroup_float8x8 e;
    simdgroup_multiply(e, ah, bh);
    simdgroup_store(e, O + 128);
    simdgroup_half8x8 h;
    simdgroup_multiply_accumulate(h, ah, bh, hc);
    simdgroup_store(h, oh + sg*64);

    simdgroup_float8x8 g = make_filled_simdgroup_matrix<float, 8>(2.5f);
    simdgroup_float8x8 diag(1.5f);
    simdgroup_float8x8 m;
    simdgroup_multiply_accumulate(m, g, diag, a);
    simdgroup_store(m, O + 192);

    O[256 + 2*lane]     = a.thread_elements()[0];
    O[256 + 2*lane + 1] = a.thread_elements()[1];

    // A store is complete for the whole simdgroup once any lane goes on.
    simdgroup_store(d, td + sg*64);
    O[320 + lane] = td[sg*64 + (lane*7 + 3)%64];
    O[352 + lane] = td[sg*64 + (lane*13 + 5)%64];
}

// A simdgroup matrix op after half the lanes returned: an error.
kernel void matrix_partial(
        device const float * f   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        ushort lane [[thread_index_in_simdgroup]]) {
    if (lane >= 16) {
        return;
    }
    simdgroup_float8x8 a;
    simdgroup_load(a, f); // MARK partial
    simdgroup_store(a, out);
}
