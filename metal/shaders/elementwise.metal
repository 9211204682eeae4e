// The elementwise ops of the forward pass, each over float and float4
// (kernel_<op>_f32 and kernel_<op>_f32_4; the encoder takes the float4 one
// when the count and every offset allow it):
//
//   kernel_add_f32:      dst[i] += x[i]
//   kernel_add_bias_f32: x[r·n + i] += b[i] (grid y: the row)
//   kernel_swiglu_f32:   dst[i] = silu(gate[i])·up[i]
//   kernel_gelu_glu_f32: dst[i] = gelu_tanh(gate[i])·up[i]
//   kernel_scale_f32:    x[i] *= s
//   kernel_softcap_f32:  x[i] = c·tanh(x[i]/c)
//   kernel_copy_f32:     dst[i] = src[i]
//
// and kernel_argmax_f32[_4], one threadgroup per row, kernel_copy_rows_f32,
// strided blocks (grid y: the block), and kernel_scale_id_f32, a factor
// per slot chosen by an expert id. One element (or
// float4) per thread: these are memory-bound, and consecutive threads read
// consecutive addresses.
#include <metal_stdlib>
using namespace metal;

// The argument struct (setBytes at buffer(0)) of the elementwise kernels.
struct ew_args {
    uint n; // elements (floats or float4s) per row
};

// The argument struct of the elementwise kernels with a scalar operand
// (scale, softcap).
struct ew_scalar_args {
    uint  n; // elements (floats or float4s)
    float s; // the scale; softcap: c
};

template <typename T>
kernel void kernel_add(
        constant ew_args & args [[buffer(0)]],
        device       T   * dst  [[buffer(1)]],
        device const T   * x    [[buffer(2)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        dst[i] += x[i];
    }
}

typedef decltype(kernel_add<float>) add_t;

template [[host_name("kernel_add_f32")]]   kernel add_t kernel_add<float>;
template [[host_name("kernel_add_f32_4")]] kernel add_t kernel_add<float4>;

template <typename T>
kernel void kernel_add_bias(
        constant ew_args & args [[buffer(0)]],
        device       T   * x    [[buffer(1)]],
        device const T   * b    [[buffer(2)]],
        uint2 gid [[thread_position_in_grid]]) {
    if (gid.x < args.n) {
        x[(ulong) gid.y*args.n + gid.x] += b[gid.x];
    }
}

typedef decltype(kernel_add_bias<float>) add_bias_t;

template [[host_name("kernel_add_bias_f32")]]   kernel add_bias_t kernel_add_bias<float>;
template [[host_name("kernel_add_bias_f32_4")]] kernel add_bias_t kernel_add_bias<float4>;

// ew_exp2 is the CPU's 2^x (engine/fastmath.Exp2, Cephes' polynomial),
// operation for operation, so that swiglu gives the CPU backend's values:
// 0 below -125 (and for NaN), clamped above 127.
template <typename T, typename I, typename U>
inline T ew_exp2(T x) {
    const auto under = !(x >= -125.0f);
    x = min(x, T(127.0f));
    const T t = x + 0.5f;
    I i = I(t); // truncates toward zero; one less below for the floor
    i = select(i, i - 1, T(i) > t);
    const T f = x - T(i);
    const T p = ((((((1.535336188319500e-4f*f + 1.339887440266574e-3f)*f + 9.618437357674640e-3f)*f +
        5.550332471162809e-2f)*f + 2.402264791363012e-1f)*f + 6.931472028550421e-1f)*f + 1.0f);
    return select(as_type<T>(as_type<U>(p) + (U(i) << 23)), T(0.0f), under);
}

inline float  ew_silu(float  x) { return x/(1.0f + ew_exp2<float,  int,  uint >(-x*1.4426950408889634f)); }
inline float4 ew_silu(float4 x) { return x/(1.0f + ew_exp2<float4, int4, uint4>(-x*1.4426950408889634f)); }

template <typename T>
kernel void kernel_swiglu(
        constant ew_args & args [[buffer(0)]],
        device       T   * dst  [[buffer(1)]],
        device const T   * gate [[buffer(2)]],
        device const T   * up   [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        dst[i] = ew_silu(gate[i])*up[i];
    }
}

typedef decltype(kernel_swiglu<float>) swiglu_t;

template [[host_name("kernel_swiglu_f32")]]   kernel swiglu_t kernel_swiglu<float>;
template [[host_name("kernel_swiglu_f32_4")]] kernel swiglu_t kernel_swiglu<float4>;

// ew_gelu is the CPU's fastmath.GeluTanh, operation for operation:
// x/2·(1 + tanh(u)), u = sqrt(2/π)·(x + 0.044715·x³), as x·sigmoid(2u) =
// x/(1 + 2^(-k·(x + 0.044715·x³))) with k = 2·sqrt(2/π)·log2(e) rounded
// to float as Go rounds the constant.
inline float  ew_gelu(float  x) { return x/(1.0f + ew_exp2<float,  int,  uint >(-2.30220818519592285f*(x + 0.044715f*x*x*x))); }
inline float4 ew_gelu(float4 x) { return x/(1.0f + ew_exp2<float4, int4, uint4>(-2.30220818519592285f*(x + 0.044715f*x*x*x))); }

template <typename T>
kernel void kernel_gelu_glu(
        constant ew_args & args [[buffer(0)]],
        device       T   * dst  [[buffer(1)]],
        device const T   * gate [[buffer(2)]],
        device const T   * up   [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        dst[i] = ew_gelu(gate[i])*up[i];
    }
}

typedef decltype(kernel_gelu_glu<float>) gelu_glu_t;

template [[host_name("kernel_gelu_glu_f32")]]   kernel gelu_glu_t kernel_gelu_glu<float>;
template [[host_name("kernel_gelu_glu_f32_4")]] kernel gelu_glu_t kernel_gelu_glu<float4>;

template <typename T>
kernel void kernel_scale(
        constant ew_scalar_args & args [[buffer(0)]],
        device T * x [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        x[i] *= args.s;
    }
}

typedef decltype(kernel_scale<float>) scale_t;

template [[host_name("kernel_scale_f32")]]   kernel scale_t kernel_scale<float>;
template [[host_name("kernel_scale_f32_4")]] kernel scale_t kernel_scale<float4>;

// ew_softcap is c·tanh(x/c) through 2^: tanh|y| = (1 - e)/(1 + e) with
// e = 2^(-2·log2(e)·|y|), sign restored (no tanh of a fast-math library
// whose error is not stated). Its absolute error is a few 1e-7·c (the CPU
// computes it in float64). Fast math assumes no NaN: one gives c here.
template <typename T, typename I, typename U>
inline T ew_softcap(T x, float c) {
    const auto neg = x < 0.0f;
    const T e = ew_exp2<T, I, U>(select(x, -x, neg)*(-2.0f*1.4426950408889634f/c));
    const T y = c*((1.0f - e)/(1.0f + e));
    return select(y, -y, neg);
}

inline float  ew_softcap(float  x, float c) { return ew_softcap<float,  int,  uint >(x, c); }
inline float4 ew_softcap(float4 x, float c) { return ew_softcap<float4, int4, uint4>(x, c); }

template <typename T>
kernel void kernel_softcap(
        constant ew_scalar_args & args [[buffer(0)]],
        device T * x [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        x[i] = ew_softcap(x[i], args.s);
    }
}

typedef decltype(kernel_softcap<float>) softcap_t;

template [[host_name("kernel_softcap_f32")]]   kernel softcap_t kernel_softcap<float>;
template [[host_name("kernel_softcap_f32_4")]] kernel softcap_t kernel_softcap<float4>;

template <typename T>
kernel void kernel_copy(
        constant ew_args & args [[buffer(0)]],
        device       T   * dst  [[buffer(1)]],
        device const T   * src  [[buffer(2)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        dst[i] = src[i];
    }
}

typedef decltype(kernel_copy<float>) copy_t;

template [[host_name("kernel_copy_f32")]]   kernel copy_t kernel_copy<float>;
template [[host_name("kernel_copy_f32_4")]] kernel copy_t kernel_copy<float4>;

// The argument struct of kernel_copy_rows_f32 (strides in floats).
struct copy_rows_args {
    uint n;          // floats per block
    uint src_stride; // floats between blocks of src
    uint dst_stride; // floats between blocks of dst
};

// kernel_copy_rows_f32: dst[r·dst_stride + i] = src[r·src_stride + i] for
// i < n; grid (blocks of the row, rows), a float per thread (Gemma 4's
// per-layer inputs: one layer's slice of every token's row).
kernel void kernel_copy_rows_f32(
        constant copy_rows_args & args [[buffer(0)]],
        device       float      * dst  [[buffer(1)]],
        device const float      * src  [[buffer(2)]],
        uint2 tg  [[threadgroup_position_in_grid]],
        uint  tid [[thread_index_in_threadgroup]],
        uint  ntg [[threads_per_threadgroup]]) {
    const uint i = tg.x*ntg + tid;
    if (i < args.n) {
        dst[(ulong) tg.y*args.dst_stride + i] = src[(ulong) tg.y*args.src_stride + i];
    }
}

// The argument struct of kernel_scale_id_f32.
struct scale_id_args {
    uint slots;   // values of x
    uint experts; // factors of w
};

// kernel_scale_id_f32: x[s] *= w[ids[s]] for s < slots, a thread per slot
// (Gemma 4's per-expert factor on the router weights); the ids are floats,
// as the router writes them, and one outside [0, experts) reads the last
// factor.
kernel void kernel_scale_id_f32(
        constant scale_id_args & args [[buffer(0)]],
        device       float     * x    [[buffer(1)]],
        device const float     * w    [[buffer(2)]],
        device const float     * ids  [[buffer(3)]],
        uint s [[thread_position_in_grid]]) {
    if (s < args.slots) {
        x[s] *= w[uint(clamp(ids[s], 0.0f, float(args.experts - 1)))];
    }
}

// argmax_take keeps (v, i) when v is strictly greater: scanning upwards,
// the first maximum; NaN never.
inline void argmax_take(thread float & bv, thread uint & bi, float v, uint i) {
    if (v > bv) {
        bv = v;
        bi = i;
    }
}

inline void argmax_scan(thread float & bv, thread uint & bi, float v, uint i) {
    argmax_take(bv, bi, v, i);
}

inline void argmax_scan(thread float & bv, thread uint & bi, float4 v, uint i) {
    argmax_take(bv, bi, v.x, 4*i);
    argmax_take(bv, bi, v.y, 4*i + 1);
    argmax_take(bv, bi, v.z, 4*i + 2);
    argmax_take(bv, bi, v.w, 4*i + 3);
}

// kernel_argmax_f32[_4]: dst[r] = the index of the largest element of row
// r of x, as a float: the first on ties, NaN never (strictly greater wins,
// and NaN is greater than nothing), 0 when no element is above -Inf: the
// CPU's sample.Greedy. One threadgroup per row, any multiple of 32 threads
// up to 1024: each thread scans a strided slice (coalesced; float4s when
// the row allows), then a simd reduction and one across the simdgroups.
template <typename T>
kernel void kernel_argmax(
        constant ew_args & args [[buffer(0)]], // n: floats per row
        device const float * x    [[buffer(1)]],
        device       float * dst  [[buffer(2)]],
        threadgroup  float * vals [[threadgroup(0)]], // 32 floats, then 32 uints
        uint   row  [[threadgroup_position_in_grid]],
        ushort tid  [[thread_position_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint none = 0xffffffffu;
    threadgroup uint * idxs = (threadgroup uint *) (vals + 32);
    device const T * xr = (device const T *) (x + (ulong) row*args.n);
    const uint n = args.n/(sizeof(T)/sizeof(float));

    // Slots of simdgroups that do not exist must lose every comparison.
    if (sg == 0) {
        vals[lane] = -INFINITY;
        idxs[lane] = none;
    }
    float bv = -INFINITY;
    uint  bi = none;
    for (uint i = tid; i < n; i += ntg) {
        argmax_scan(bv, bi, xr[i], i);
    }
    // bv is never NaN, so max and == are well defined.
    float m = simd_max(bv);
    uint  mi = simd_min(bv == m ? bi : none);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane == 0) {
        vals[sg] = m;
        idxs[sg] = mi;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0) {
        const float v = vals[lane];
        m  = simd_max(v);
        mi = simd_min(v == m ? idxs[lane] : none);
        if (lane == 0) {
            dst[row] = m > -INFINITY ? float(mi) : 0.0f;
        }
    }
}

typedef decltype(kernel_argmax<float>) argmax_t;

template [[host_name("kernel_argmax_f32")]]   kernel argmax_t kernel_argmax<float>;
template [[host_name("kernel_argmax_f32_4")]] kernel argmax_t kernel_argmax<float4>;
