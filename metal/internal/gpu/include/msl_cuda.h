// The Metal Shading Language as CUDA, for the .metal kernels translated by
// metal/msl (TranslateCUDA): scalar, vector and matrix types, the metal::
// functions the kernels use, barriers and simd collectives as warp
// shuffles, and the helpers the generated entries use to bind buffers and
// built-in positions. Everything is in namespace msl, where the translated
// sources live, so that MSL's float4 hides CUDA's.
//
// simd collectives follow Metal: only the lanes still running (not those
// that returned) take part. That costs a __activemask() and a branch per
// call; -DMSL_FULL_WARP assumes every collective meets the whole warp (true
// for kernels that never return early before one: attention, mul_mv).
//
// Without nvcc (__CUDACC__ undefined) the CUDA keywords are empty stand-ins,
// so that a C++ compiler can check the translation's syntax on any machine.
#ifndef MSL_CUDA_H
#define MSL_CUDA_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#else
#define __device__
#define __host__
#define __global__
#define __shared__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __align__(n) __attribute__((aligned(n)))
typedef _Float16 __half;
struct msl_mock_dim3 { unsigned x, y, z; };
extern msl_mock_dim3 threadIdx, blockIdx, blockDim, gridDim;
inline void __syncthreads() {}
inline void __syncwarp(unsigned = 0xffffffffu) {}
inline unsigned __activemask() { return 0xffffffffu; }
inline int __ffs(unsigned x) { return __builtin_ffs(x); }
template <class T> T __shfl_sync(unsigned, T v, int, int = 32) { return v; }
template <class T> T __shfl_xor_sync(unsigned, T v, int, int = 32) { return v; }
template <class T> T __shfl_down_sync(unsigned, T v, unsigned, int = 32) { return v; }
#endif

#define __MSL_CUDA__ 1
#ifndef __METAL_VERSION__
#define __METAL_VERSION__ 310
#endif
#ifndef MAXFLOAT
#define MAXFLOAT FLT_MAX
#endif

#define MSL_FN __device__ __forceinline__

namespace msl {

typedef __half half;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

template <class T, int N> struct vec;

template <class T> struct is_vec : std::false_type {};
template <class T, int N> struct is_vec<vec<T, N>> : std::true_type {};
template <class T> struct elem { typedef T type; static constexpr int n = 1; };
template <class T, int N> struct elem<vec<T, N>> { typedef T type; static constexpr int n = N; };
template <class T> constexpr int ncomp() { return elem<typename std::decay<T>::type>::n; }

template <class T, class A> MSL_FN void fill(T *v, int &k, const A &a) {
  if constexpr (is_vec<A>::value) {
#pragma unroll
    for (int i = 0; i < elem<A>::n; i++) v[k++] = T(a[i]);
  } else {
    v[k++] = T(a);
  }
}

// ---- vectors: x, y, z, w members; swizzles are methods (v.xy()) ----

#define MSL_VEC_BODY(N)                                                                           \
  typedef T value_type;                                                                           \
  vec() = default;                                                                                \
  MSL_FN vec(T s) {                                                                               \
    _Pragma("unroll") for (int i = 0; i < N; i++)(*this)[i] = s;                                  \
  }                                                                                               \
  template <class U, typename std::enable_if<!std::is_same<U, T>::value, int>::type = 0>         \
  MSL_FN explicit vec(const vec<U, N> &o) {                                                       \
    _Pragma("unroll") for (int i = 0; i < N; i++)(*this)[i] = T(o[i]);                            \
  }                                                                                               \
  template <class A, class B, class... R,                                                         \
            typename std::enable_if<ncomp<A>() + ncomp<B>() + (0 + ... + ncomp<R>()) == N, int>::type = 0> \
  MSL_FN vec(const A &a, const B &b, const R &...r) {                                             \
    int k = 0;                                                                                    \
    fill(&this->x, k, a);                                                                         \
    fill(&this->x, k, b);                                                                         \
    (fill(&this->x, k, r), ...);                                                                  \
  }                                                                                               \
  MSL_FN T &operator[](int i) { return (&this->x)[i]; }                                           \
  MSL_FN const T &operator[](int i) const { return (&this->x)[i]; }                               \
  MSL_VEC_ARITH(+, N)                                                                             \
  MSL_VEC_ARITH(-, N)                                                                             \
  MSL_VEC_ARITH(*, N)                                                                             \
  MSL_VEC_ARITH(/, N)                                                                             \
  MSL_VEC_ARITH(%, N)                                                                             \
  MSL_VEC_ARITH(&, N)                                                                             \
  MSL_VEC_ARITH(|, N)                                                                             \
  MSL_VEC_ARITH(^, N)                                                                             \
  MSL_VEC_ARITH(<<, N)                                                                            \
  MSL_VEC_ARITH(>>, N)                                                                            \
  MSL_VEC_CMP(==, N)                                                                              \
  MSL_VEC_CMP(!=, N)                                                                              \
  MSL_VEC_CMP(<, N)                                                                               \
  MSL_VEC_CMP(<=, N)                                                                              \
  MSL_VEC_CMP(>, N)                                                                               \
  MSL_VEC_CMP(>=, N)                                                                              \
  MSL_VEC_CMP(&&, N)                                                                              \
  MSL_VEC_CMP(||, N)                                                                              \
  friend MSL_FN vec operator-(const vec &a) {                                                     \
    vec r;                                                                                        \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = T(-a[i]);                                \
    return r;                                                                                     \
  }                                                                                               \
  friend MSL_FN vec operator+(const vec &a) { return a; }                                         \
  friend MSL_FN vec operator~(const vec &a) {                                                     \
    vec r;                                                                                        \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = T(~a[i]);                                \
    return r;                                                                                     \
  }                                                                                               \
  friend MSL_FN vec<bool, N> operator!(const vec &a) {                                            \
    vec<bool, N> r;                                                                               \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = !a[i];                                   \
    return r;                                                                                     \
  }                                                                                               \
  MSL_SWIZZLES

#define MSL_VEC_ARITH(op, N)                                                                      \
  friend MSL_FN vec operator op(const vec &a, const vec &b) {                                     \
    vec r;                                                                                        \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = T(a[i] op b[i]);                         \
    return r;                                                                                     \
  }                                                                                               \
  friend MSL_FN vec operator op(const vec &a, T b) {                                              \
    vec r;                                                                                        \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = T(a[i] op b);                            \
    return r;                                                                                     \
  }                                                                                               \
  friend MSL_FN vec operator op(T a, const vec &b) {                                              \
    vec r;                                                                                        \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = T(a op b[i]);                            \
    return r;                                                                                     \
  }                                                                                               \
  MSL_FN vec &operator op##=(const vec &b) {                                                      \
    _Pragma("unroll") for (int i = 0; i < N; i++)(*this)[i] = T((*this)[i] op b[i]);              \
    return *this;                                                                                 \
  }                                                                                               \
  MSL_FN vec &operator op##=(T b) {                                                               \
    _Pragma("unroll") for (int i = 0; i < N; i++)(*this)[i] = T((*this)[i] op b);                 \
    return *this;                                                                                 \
  }

#define MSL_VEC_CMP(op, N)                                                                        \
  friend MSL_FN vec<bool, N> operator op(const vec &a, const vec &b) {                            \
    vec<bool, N> r;                                                                               \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = a[i] op b[i];                            \
    return r;                                                                                     \
  }                                                                                               \
  friend MSL_FN vec<bool, N> operator op(const vec &a, T b) {                                     \
    vec<bool, N> r;                                                                               \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = a[i] op b;                               \
    return r;                                                                                     \
  }                                                                                               \
  friend MSL_FN vec<bool, N> operator op(T a, const vec &b) {                                     \
    vec<bool, N> r;                                                                               \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = a op b[i];                               \
    return r;                                                                                     \
  }

// Swizzle methods (reads only), bodies instantiated on use.
#define MSL_IX_x 0
#define MSL_IX_y 1
#define MSL_IX_z 2
#define MSL_IX_w 3
#define MSL_C(a) (*this)[MSL_IX_##a]
#define MSL_SW2(a, b) MSL_FN vec<T, 2> a##b() const { return vec<T, 2>(MSL_C(a), MSL_C(b)); }
#define MSL_SW3(a, b, c) MSL_FN vec<T, 3> a##b##c() const { return vec<T, 3>(MSL_C(a), MSL_C(b), MSL_C(c)); }
#define MSL_SW4(a, b, c, d) MSL_FN vec<T, 4> a##b##c##d() const { return vec<T, 4>(MSL_C(a), MSL_C(b), MSL_C(c), MSL_C(d)); }
#define MSL_SW2_A(a) MSL_SW2(a, x) MSL_SW2(a, y) MSL_SW2(a, z) MSL_SW2(a, w)
#define MSL_SW3_B(a, b) MSL_SW3(a, b, x) MSL_SW3(a, b, y) MSL_SW3(a, b, z) MSL_SW3(a, b, w)
#define MSL_SW3_A(a) MSL_SW3_B(a, x) MSL_SW3_B(a, y) MSL_SW3_B(a, z) MSL_SW3_B(a, w)
#define MSL_SW4_C(a, b, c) MSL_SW4(a, b, c, x) MSL_SW4(a, b, c, y) MSL_SW4(a, b, c, z) MSL_SW4(a, b, c, w)
#define MSL_SW4_B(a, b) MSL_SW4_C(a, b, x) MSL_SW4_C(a, b, y) MSL_SW4_C(a, b, z) MSL_SW4_C(a, b, w)
#define MSL_SW4_A(a) MSL_SW4_B(a, x) MSL_SW4_B(a, y) MSL_SW4_B(a, z) MSL_SW4_B(a, w)
#define MSL_SWIZZLES                                                                              \
  MSL_SW2_A(x) MSL_SW2_A(y) MSL_SW2_A(z) MSL_SW2_A(w)                                             \
  MSL_SW3_A(x) MSL_SW3_A(y) MSL_SW3_A(z) MSL_SW3_A(w)                                             \
  MSL_SW4_A(x) MSL_SW4_A(y) MSL_SW4_A(z) MSL_SW4_A(w)

template <class T> struct alignas(2 * sizeof(T)) vec<T, 2> {
  T x, y;
  MSL_VEC_BODY(2)
};
template <class T> struct alignas(4 * sizeof(T)) vec<T, 3> {
  T x, y, z;
  MSL_VEC_BODY(3)
};
template <class T> struct alignas(4 * sizeof(T)) vec<T, 4> {
  T x, y, z, w;
  MSL_VEC_BODY(4)
};

#define MSL_VEC_TYPES(T, name)                                                                    \
  typedef vec<T, 2> name##2;                                                                      \
  typedef vec<T, 3> name##3;                                                                      \
  typedef vec<T, 4> name##4;
MSL_VEC_TYPES(float, float)
MSL_VEC_TYPES(half, half)
MSL_VEC_TYPES(int, int)
MSL_VEC_TYPES(uint, uint)
MSL_VEC_TYPES(short, short)
MSL_VEC_TYPES(ushort, ushort)
MSL_VEC_TYPES(char, char)
MSL_VEC_TYPES(uchar, uchar)
MSL_VEC_TYPES(long, long)
MSL_VEC_TYPES(ulong, ulong)
MSL_VEC_TYPES(bool, bool)

// ---- matrices: columns of vectors ----

template <class T, int C, int R> struct mat {
  vec<T, R> columns[C];
  mat() = default;
  MSL_FN explicit mat(T d) {
#pragma unroll
    for (int c = 0; c < C; c++) {
      columns[c] = vec<T, R>(T(0));
      if (c < R) columns[c][c] = d;
    }
  }
  template <class... V, typename std::enable_if<sizeof...(V) == C && C != 1, int>::type = 0>
  MSL_FN mat(const V &...cols) : columns{vec<T, R>(cols)...} {}
  template <class U, typename std::enable_if<!std::is_same<U, T>::value, int>::type = 0>
  MSL_FN explicit mat(const mat<U, C, R> &o) {
#pragma unroll
    for (int c = 0; c < C; c++) columns[c] = vec<T, R>(o.columns[c]);
  }
  MSL_FN vec<T, R> &operator[](int c) { return columns[c]; }
  MSL_FN const vec<T, R> &operator[](int c) const { return columns[c]; }
  friend MSL_FN mat operator+(const mat &a, const mat &b) {
    mat r;
#pragma unroll
    for (int c = 0; c < C; c++) r.columns[c] = a.columns[c] + b.columns[c];
    return r;
  }
  friend MSL_FN mat operator-(const mat &a, const mat &b) {
    mat r;
#pragma unroll
    for (int c = 0; c < C; c++) r.columns[c] = a.columns[c] - b.columns[c];
    return r;
  }
  friend MSL_FN mat operator*(const mat &a, T s) {
    mat r;
#pragma unroll
    for (int c = 0; c < C; c++) r.columns[c] = a.columns[c] * s;
    return r;
  }
  friend MSL_FN mat operator*(T s, const mat &a) { return a * s; }
  friend MSL_FN vec<T, R> operator*(const mat &a, const vec<T, C> &x) {
    vec<T, R> r(T(0));
#pragma unroll
    for (int c = 0; c < C; c++) r += a.columns[c] * x[c];
    return r;
  }
};
typedef mat<float, 2, 2> float2x2;
typedef mat<float, 3, 3> float3x3;
typedef mat<float, 4, 4> float4x4;
typedef mat<half, 2, 2> half2x2;
typedef mat<half, 3, 3> half3x3;
typedef mat<half, 4, 4> half4x4;

// ---- functions ----

template <class To, class From> MSL_FN To as_type(const From &x) {
  static_assert(sizeof(To) == sizeof(From), "as_type: the types differ in size");
  To r;
  memcpy((void *)&r, (const void *)&x, sizeof(To));
  return r;
}

#define MSL_MAP1(name)                                                                            \
  template <class T, int N> MSL_FN vec<T, N> name(const vec<T, N> &x) {                           \
    vec<T, N> r;                                                                                  \
    _Pragma("unroll") for (int i = 0; i < N; i++) r[i] = name(x[i]);                              \
    return r;                                                                                     \
  }
#define MSL_FLOAT1(name, impl)                                                                    \
  MSL_FN float name(float x) { return impl(x); }                                                  \
  MSL_FN half name(half x) { return half(impl(float(x))); }                                       \
  MSL_MAP1(name)

MSL_FLOAT1(sqrt, ::sqrtf)
MSL_FLOAT1(rsqrt, 1.0f / ::sqrtf)
MSL_FLOAT1(exp, ::expf)
MSL_FLOAT1(exp2, ::exp2f)
MSL_FLOAT1(log, ::logf)
MSL_FLOAT1(log2, ::log2f)
MSL_FLOAT1(sin, ::sinf)
MSL_FLOAT1(cos, ::cosf)
MSL_FLOAT1(tanh, ::tanhf)
MSL_FLOAT1(floor, ::floorf)
MSL_FLOAT1(ceil, ::ceilf)
MSL_FLOAT1(trunc, ::truncf)
MSL_FLOAT1(round, ::roundf)
MSL_FLOAT1(rint, ::rintf)
MSL_FLOAT1(fabs, ::fabsf)

MSL_FN float abs(float x) { return ::fabsf(x); }
MSL_FN int abs(int x) { return x < 0 ? -x : x; }

// min and max: fmin/fmax for floats (a NaN loses), plain comparisons else.
MSL_FN float min(float a, float b) { return ::fminf(a, b); }
MSL_FN float max(float a, float b) { return ::fmaxf(a, b); }
MSL_FN half min(half a, half b) { return half(::fminf(float(a), float(b))); }
MSL_FN half max(half a, half b) { return half(::fmaxf(float(a), float(b))); }
#define MSL_INT_MINMAX(T)                                                                         \
  MSL_FN T min(T a, T b) { return b < a ? b : a; }                                                \
  MSL_FN T max(T a, T b) { return a < b ? b : a; }
MSL_INT_MINMAX(int)
MSL_INT_MINMAX(uint)
MSL_INT_MINMAX(short)
MSL_INT_MINMAX(ushort)
MSL_INT_MINMAX(char)
MSL_INT_MINMAX(uchar)
MSL_INT_MINMAX(long)
MSL_INT_MINMAX(ulong)
template <class T, int N> MSL_FN vec<T, N> min(const vec<T, N> &a, const vec<T, N> &b) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; i++) r[i] = min(a[i], b[i]);
  return r;
}
template <class T, int N> MSL_FN vec<T, N> max(const vec<T, N> &a, const vec<T, N> &b) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; i++) r[i] = max(a[i], b[i]);
  return r;
}
template <class T, int N> MSL_FN vec<T, N> min(const vec<T, N> &a, typename elem<vec<T, N>>::type b) { return min(a, vec<T, N>(b)); }
template <class T, int N> MSL_FN vec<T, N> max(const vec<T, N> &a, typename elem<vec<T, N>>::type b) { return max(a, vec<T, N>(b)); }
template <class T> MSL_FN T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <class T, int N> MSL_FN vec<T, N> clamp(const vec<T, N> &x, T lo, T hi) { return min(max(x, vec<T, N>(lo)), vec<T, N>(hi)); }

MSL_FN float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
template <int N> MSL_FN vec<float, N> fma(const vec<float, N> &a, const vec<float, N> &b, const vec<float, N> &c) {
  vec<float, N> r;
#pragma unroll
  for (int i = 0; i < N; i++) r[i] = ::fmaf(a[i], b[i], c[i]);
  return r;
}

template <class T, int N> MSL_FN T dot(const vec<T, N> &a, const vec<T, N> &b) {
  T s = a[0] * b[0];
#pragma unroll
  for (int i = 1; i < N; i++) s += a[i] * b[i];
  return s;
}

template <class T> MSL_FN T select(T a, T b, bool c) { return c ? b : a; }
template <class T, int N> MSL_FN vec<T, N> select(const vec<T, N> &a, const vec<T, N> &b, const vec<bool, N> &c) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; i++) r[i] = c[i] ? b[i] : a[i];
  return r;
}
template <class T, int N> MSL_FN vec<T, N> select(const vec<T, N> &a, const vec<T, N> &b, bool c) { return c ? b : a; }

MSL_FN bool isnan(float x) { return x != x; }
MSL_FN bool isinf(float x) { return ::fabsf(x) == INFINITY; }

namespace metal {
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
MSL_FN mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(int(a) | int(b)); }
namespace precise {
MSL_FN float sin(float x) { return ::sinf(x); }
MSL_FN float cos(float x) { return ::cosf(x); }
MSL_FN float sqrt(float x) { return ::sqrtf(x); }
MSL_FN float exp2(float x) { return ::exp2f(x); }
} // namespace precise
namespace fast {
MSL_FN float exp2(float x) { return ::exp2f(x); }
} // namespace fast
} // namespace metal
namespace precise = metal::precise;

// ---- thread positions ----

MSL_FN uint lin_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
MSL_FN uint3 thread_position_in_grid() {
  return uint3(blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y, blockIdx.z * blockDim.z + threadIdx.z);
}
MSL_FN uint3 thread_position_in_threadgroup() { return uint3(threadIdx.x, threadIdx.y, threadIdx.z); }
MSL_FN uint3 threadgroup_position_in_grid() { return uint3(blockIdx.x, blockIdx.y, blockIdx.z); }
MSL_FN uint3 threads_per_threadgroup() { return uint3(blockDim.x, blockDim.y, blockDim.z); }
MSL_FN uint3 threadgroups_per_grid() { return uint3(gridDim.x, gridDim.y, gridDim.z); }
MSL_FN uint3 threads_per_grid() { return uint3(gridDim.x * blockDim.x, gridDim.y * blockDim.y, gridDim.z * blockDim.z); }
MSL_FN uint3 thread_index_in_threadgroup() { return uint3(lin_tid(), 0u, 0u); }
MSL_FN uint3 thread_index_in_simdgroup() { return uint3(lin_tid() & 31u, 0u, 0u); }
MSL_FN uint3 simdgroup_index_in_threadgroup() { return uint3(lin_tid() >> 5, 0u, 0u); }
MSL_FN uint3 simdgroups_per_threadgroup() { return uint3((blockDim.x * blockDim.y * blockDim.z + 31u) >> 5, 0u, 0u); }
MSL_FN uint3 threads_per_simdgroup() { return uint3(32u, 0u, 0u); }

// ---- barriers and simd collectives ----

MSL_FN void threadgroup_barrier(metal::mem_flags) { __syncthreads(); }

#ifdef MSL_FULL_WARP
MSL_FN unsigned simd_mask() { return 0xffffffffu; }
#else
MSL_FN unsigned simd_mask() { return __activemask(); }
#endif

MSL_FN void simdgroup_barrier(metal::mem_flags) { __syncwarp(simd_mask()); }

// Shuffles of 4-byte scalars directly, of smaller ones through uint, of
// vectors by component.
template <class T> MSL_FN T shfl_xor(unsigned m, T v, int o) {
  if constexpr (is_vec<T>::value) {
    T r;
#pragma unroll
    for (int i = 0; i < elem<T>::n; i++) r[i] = shfl_xor(m, v[i], o);
    return r;
  } else if constexpr (sizeof(T) == 4) {
    return as_type<T>(__shfl_xor_sync(m, as_type<uint>(v), o));
  } else {
    return T(__shfl_xor_sync(m, int(v), o));
  }
}
template <class T> MSL_FN T shfl_down(unsigned m, T v, unsigned o) {
  if constexpr (is_vec<T>::value) {
    T r;
#pragma unroll
    for (int i = 0; i < elem<T>::n; i++) r[i] = shfl_down(m, v[i], o);
    return r;
  } else if constexpr (sizeof(T) == 4) {
    return as_type<T>(__shfl_down_sync(m, as_type<uint>(v), o));
  } else {
    return T(__shfl_down_sync(m, int(v), o));
  }
}
template <class T> MSL_FN T shfl_idx(unsigned m, T v, int l) {
  if constexpr (is_vec<T>::value) {
    T r;
#pragma unroll
    for (int i = 0; i < elem<T>::n; i++) r[i] = shfl_idx(m, v[i], l);
    return r;
  } else if constexpr (sizeof(T) == 4) {
    return as_type<T>(__shfl_sync(m, as_type<uint>(v), l));
  } else {
    return T(__shfl_sync(m, int(v), l));
  }
}

template <class T> MSL_FN T simd_shuffle_xor(T v, ushort o) { return shfl_xor(simd_mask(), v, o); }
template <class T> MSL_FN T simd_shuffle_down(T v, ushort o) { return shfl_down(simd_mask(), v, o); }
template <class T> MSL_FN T simd_shuffle(T v, ushort l) { return shfl_idx(simd_mask(), v, l); }
template <class T> MSL_FN T simd_broadcast(T v, ushort l) { return shfl_idx(simd_mask(), v, l); }

struct op_sum { template <class T> MSL_FN T operator()(T a, T b) const { return a + b; } };
struct op_max { template <class T> MSL_FN T operator()(T a, T b) const { return max(a, b); } };
struct op_min { template <class T> MSL_FN T operator()(T a, T b) const { return min(a, b); } };

// A reduction over the active lanes: a butterfly when all 32 run, else
// lane by lane over the active mask (same result in every active lane).
template <class T, class Op> MSL_FN T simd_reduce(T x, Op op) {
  const unsigned m = simd_mask();
  if (m == 0xffffffffu) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = op(x, shfl_xor(0xffffffffu, x, o));
    return x;
  }
  unsigned r = m;
  T s = shfl_idx(m, x, __ffs(r) - 1);
  for (r &= r - 1; r; r &= r - 1) s = op(s, shfl_idx(m, x, __ffs(r) - 1));
  return s;
}
template <class T> MSL_FN T simd_sum(T x) { return simd_reduce(x, op_sum()); }
template <class T> MSL_FN T simd_max(T x) { return simd_reduce(x, op_max()); }
template <class T> MSL_FN T simd_min(T x) { return simd_reduce(x, op_min()); }

// ---- simdgroup matrices ----
// An 8x8 matrix of a warp, two elements per lane. Metal's layout (Apple's,
// the emulator's, what thread_elements() shows): lane l holds row
// sgm_row(l), columns sgm_col(l) and +1. The shim holds a matrix in the
// tensor core's fragment layouts instead, so that a chain of products moves
// no data between lanes:
// - the row layout, lane l: row l/4, columns 2(l%4) and +1 (mma.m16n8k8's
//   A rows 0-7, C and D);
// - a half matrix loaded from memory also keeps its column layout, lane l:
//   column l/4, rows 2(l%4) and +1 (the B fragment), two more loads that
//   the compiler drops when the matrix is never a B operand.
// The row layout holds Apple's pairs under a fixed permutation of lanes, so
// thread_elements() converts with one shuffle per 32-bit word and the
// matrix stays in Apple's layout (apple) until a product or load replaces
// it. The layout flags are plain members; with every use inlined and the
// kernels' 8x8 loops unrolled the compiler folds them away. Loads and
// stores end with __syncwarp (the emulator's rule: a load has read, a store
// has written, for the whole simdgroup once a lane goes on).
//
// Products (d = c + a·b, d in the row layout):
// - half a and b: one tensor-core mma.sync.m16n8k8 (f16 inputs, f32
//   accumulator; rows 8-15 of its A are zero). From the layouts above its
//   fragments are registers the lane already holds. A product of two halves
//   is exact in float; the tensor core adds the 8 products and c in its own
//   order and rounding, where the emulator runs the fma chain, so a result
//   can differ from the emulator's by a few float ulps of the largest
//   partial sum per product (run.sh check's bound for mul_mm says how
//   much).
// - any other types (float: tensor cores take no fp32): each lane gathers
//   its row of a and its two columns of b with 24 shuffles and runs the
//   emulator's chain, acc = fma(a[m][k], b[k][n], acc) for k = 0..7, in
//   float: bit for bit the emulator's result.
MSL_FN int sgm_lane() { return int(lin_tid() & 31u); }
MSL_FN int sgm_row(int l) { return ((l >> 2) & 4) + ((l >> 1) & 3); }
MSL_FN int sgm_col(int l) { return ((l >> 2) & 2) * 2 + (l & 1) * 2; }
// The lane that holds element (m, n) (n even: both of the pair) in Apple's
// layout, and in the row layout.
MSL_FN int sgm_owner(int m, int n) { return 16 * (m >> 2) + 8 * (n >> 2) + 4 * ((m >> 1) & 1) + 2 * (m & 1) + ((n >> 1) & 1); }
MSL_FN int sgm_owner_in(bool apple, int m, int n) { return apple ? sgm_owner(m, n) : 4 * m + (n >> 1); }

MSL_FN float sgm_shfl(float v, int l) { return __shfl_sync(0xffffffffu, v, l); }
// A lane's pair from lane l.
template <class T> MSL_FN vec<T, 2> sgm_shfl_pair(const vec<T, 2> &v, int l) {
  if constexpr (sizeof(vec<T, 2>) == 4) {
    return as_type<vec<T, 2>>(__shfl_sync(0xffffffffu, as_type<uint>(v), l));
  } else {
    return vec<T, 2>(T(sgm_shfl(float(v[0]), l)), T(sgm_shfl(float(v[1]), l)));
  }
}

#ifdef MSL_SGM_LOAD_NOSYNC
#define MSL_SGM_LOAD_SYNC()
#else
#define MSL_SGM_LOAD_SYNC() __syncwarp()
#endif
#ifdef MSL_SGM_MMA_NONVOLATILE
#define MSL_SGM_ASM asm
#else
#define MSL_SGM_ASM asm volatile
#endif

template <class T, int Cols, int Rows = Cols> struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "only 8x8 simdgroup matrices");
  vec<T, 2> e;   // the row layout, or Apple's when apple
  vec<T, 2> col; // the column layout when has_col
  bool apple, has_col;
  simdgroup_matrix() = default;
  MSL_FN explicit simdgroup_matrix(T d) {
    const int l = sgm_lane(), m = l >> 2, n = 2 * (l & 3);
    e[0] = m == n ? d : T(0.0f);
    e[1] = m == n + 1 ? d : T(0.0f);
    col = e; // the diagonal matrix is its own transpose
    apple = false, has_col = true;
  }
  MSL_FN vec<T, 2> &thread_elements() {
    if (!apple) {
      const int l = sgm_lane();
      e = sgm_shfl_pair(e, 4 * sgm_row(l) + (sgm_col(l) >> 1));
      apple = true;
    }
    has_col = false; // the caller may write the elements
    return e;
  }
  MSL_FN vec<T, 2> thread_elements() const {
    const int l = sgm_lane();
    return apple ? e : sgm_shfl_pair(e, 4 * sgm_row(l) + (sgm_col(l) >> 1));
  }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;

template <class T, int Cols, int Rows = Cols, class V> MSL_FN simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(V v) {
  simdgroup_matrix<T, Cols, Rows> r;
  r.e = r.col = vec<T, 2>(T(v));
  r.apple = false, r.has_col = true;
  return r;
}

template <class T> struct sgm_id { typedef T type; };

// Element (r, c) of the matrix in memory at origin (column x, row y).
template <class T>
MSL_FN const T &sgm_at(const T *src, ulong elements_per_row, ulong2 origin, bool transpose, int r, int c) {
  return transpose ? src[(origin.y + ulong(c)) * elements_per_row + origin.x + ulong(r)] : src[(origin.y + ulong(r)) * elements_per_row + origin.x + ulong(c)];
}

template <class T, int C, int R>
MSL_FN void simdgroup_load(simdgroup_matrix<T, C, R> &d, const typename sgm_id<T>::type *src, ulong elements_per_row = C, ulong2 matrix_origin = 0,
                           bool transpose_matrix = false) {
  const int l = sgm_lane(), m = l >> 2, n = 2 * (l & 3);
#pragma unroll
  for (int i = 0; i < 2; i++) d.e[i] = sgm_at(src, elements_per_row, matrix_origin, transpose_matrix, m, n + i);
  d.apple = false, d.has_col = false;
  if constexpr (std::is_same<T, half>::value) {
#pragma unroll
    for (int i = 0; i < 2; i++) d.col[i] = sgm_at(src, elements_per_row, matrix_origin, transpose_matrix, n + i, m);
    d.has_col = true;
  }
  MSL_SGM_LOAD_SYNC();
}

template <class T, int C, int R>
MSL_FN void simdgroup_store(const simdgroup_matrix<T, C, R> &a, typename sgm_id<T>::type *dst, ulong elements_per_row = C, ulong2 matrix_origin = 0,
                            bool transpose_matrix = false) {
  const int l = sgm_lane(), m = a.apple ? sgm_row(l) : l >> 2, n = a.apple ? sgm_col(l) : 2 * (l & 3);
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const ulong r = transpose_matrix ? ulong(n + i) : ulong(m), c = transpose_matrix ? ulong(m) : ulong(n + i);
    dst[(matrix_origin.y + r) * elements_per_row + matrix_origin.x + c] = a.e[i];
  }
  __syncwarp();
}

// A lane's pair of c in the row layout, as floats.
template <class T> MSL_FN vec<float, 2> sgm_row_pair(const simdgroup_matrix<T, 8, 8> &c) {
  const int l = sgm_lane();
  const vec<T, 2> p = c.apple ? sgm_shfl_pair(c.e, sgm_owner(l >> 2, 2 * (l & 3))) : c.e;
  return vec<float, 2>(float(p[0]), float(p[1]));
}

// c: this lane's pair of c in the row layout (-0 for a plain product). d
// may be a, b or c: they are read before d is written.
template <class TD, class TA, class TB>
MSL_FN void sgm_product(simdgroup_matrix<TD, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a, const simdgroup_matrix<TB, 8, 8> &b, vec<float, 2> c) {
  const int l = sgm_lane(), m = l >> 2, n = 2 * (l & 3);
#ifdef __CUDACC__
  if constexpr (std::is_same<TA, half>::value && std::is_same<TB, half>::value) {
    // Fragments of m16n8k8: g = l/4, t = l%4; A: (g, 2t..2t+1); B: (2t, g)
    // and (2t+1, g); C/D: (g, 2t..2t+1). (g, t) is (m, n/2).
    uint aw = as_type<uint>(a.e), bf = as_type<uint>(b.col);
    if (a.apple) aw = __shfl_sync(0xffffffffu, aw, sgm_owner(m, n));
    if (!b.has_col) {
      const uint bw = as_type<uint>(b.e);
      const uint b0 = __shfl_sync(0xffffffffu, bw, sgm_owner_in(b.apple, n, m & ~1));
      const uint b1 = __shfl_sync(0xffffffffu, bw, sgm_owner_in(b.apple, n + 1, m & ~1));
      bf = (m & 1) ? ((b0 >> 16) | (b1 & 0xffff0000u)) : ((b0 & 0xffffu) | (b1 << 16));
    }
    float d0, d1, d2, d3;
    MSL_SGM_ASM("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                 : "r"(aw), "r"(0u), "r"(bf), "f"(c[0]), "f"(c[1]), "f"(0.0f), "f"(0.0f));
    d.e = vec<TD, 2>(TD(d0), TD(d1));
    d.apple = false, d.has_col = false;
    return;
  }
#endif
  float acc0 = c[0], acc1 = c[1];
#pragma unroll
  for (int k = 0; k < 8; k += 2) {
    const int la = sgm_owner_in(a.apple, m, k), lb0 = sgm_owner_in(b.apple, k, n), lb1 = sgm_owner_in(b.apple, k + 1, n);
    const float a0 = sgm_shfl(float(a.e[0]), la), a1 = sgm_shfl(float(a.e[1]), la);
    const float b00 = sgm_shfl(float(b.e[0]), lb0), b01 = sgm_shfl(float(b.e[1]), lb0);
    const float b10 = sgm_shfl(float(b.e[0]), lb1), b11 = sgm_shfl(float(b.e[1]), lb1);
    acc0 = ::fmaf(a0, b00, acc0);
    acc1 = ::fmaf(a0, b01, acc1);
    acc0 = ::fmaf(a1, b10, acc0);
    acc1 = ::fmaf(a1, b11, acc1);
  }
  d.e = vec<TD, 2>(TD(acc0), TD(acc1));
  d.apple = false, d.has_col = false;
}

template <class TD, class TA, class TB, class TC>
MSL_FN void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a, const simdgroup_matrix<TB, 8, 8> &b,
                                          const simdgroup_matrix<TC, 8, 8> &c) {
  sgm_product(d, a, b, sgm_row_pair(c));
}
template <class TD, class TA, class TB>
MSL_FN void simdgroup_multiply(simdgroup_matrix<TD, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a, const simdgroup_matrix<TB, 8, 8> &b) {
  sgm_product(d, a, b, vec<float, 2>(-0.0f));
}

// ---- entry helpers (the generated __global__ functions use these) ----

template <int I, class... A> struct nth;
template <class H, class... R> struct nth<0, H, R...> { typedef H type; };
template <int I, class H, class... R> struct nth<I, H, R...> { typedef typename nth<I - 1, R...>::type type; };
template <class F, int I> struct fn_arg;
template <class Ret, class... A, int I> struct fn_arg<Ret (*)(A...), I> { typedef typename nth<I, A...>::type type; };

// bind_arg turns a buffer pointer into the parameter: a pointer, or a
// reference (constant T &).
template <class P> MSL_FN P bind_arg(void *p) {
  if constexpr (std::is_pointer<P>::value) {
    return (P)p;
  } else {
    typedef typename std::remove_reference<P>::type V;
    return *(V *)p;
  }
}

template <class P> MSL_FN P builtin_arg(uint3 v) {
  typedef typename std::remove_cv<typename std::remove_reference<P>::type>::type T;
  if constexpr (is_vec<T>::value) {
    typedef typename elem<T>::type E;
    if constexpr (elem<T>::n == 2) {
      return T(E(v.x), E(v.y));
    } else {
      return T(E(v.x), E(v.y), E(v.z));
    }
  } else {
    return T(v.x);
  }
}

// arg_bytes is the size of the struct a reference parameter (`constant
// T & args`) reads, 0 for a pointer: the registry's argument sizes.
template <class P> constexpr int arg_bytes() {
  return std::is_reference<P>::value ? (int)sizeof(typename std::remove_reference<P>::type) : 0;
}

} // namespace msl

// Host-side registry entries (generated tables).
struct msl_kernel_entry {
  const char *name;
  int max_threads;
  const char *buffers;      // buffer indices, comma-separated
  const char *threadgroups; // threadgroup indices
  const void *fn;
#ifdef __CUDACC__
  void (*launch)(dim3, dim3, size_t, cudaStream_t, void *const *, const unsigned *);
#else
  const void *launch;
#endif
  const char *where;
  // {buffer index, bytes of the struct a `constant T &` parameter reads}
  // pairs, -1-terminated: what an inline argument block must hold.
  const int *arg_bytes;
};
struct msl_constant_entry {
  int index;
  const char *name;
  const char *type;
  int (*set)(const void *v, int size, bool def);
};

#endif // MSL_CUDA_H
