// The Metal Shading Language as C++ for the emulator: scalar and vector
// types, the metal:: math the kernels use, atomics, barriers and simd
// collectives (switch points of the runtime), and the kernel-argument
// helpers that the pre-pass (metal/msl) writes into kernel signatures.
// Compiled with clang >= 17, -std=c++17 -fms-extensions (for the swizzle
// properties). The MSL keywords become macros only at the end of this file.
#ifndef MSL_SHIM_H
#define MSL_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "msl_rt.h"

#define __MSL_EMULATOR__ 1
#ifndef __METAL_VERSION__
#define __METAL_VERSION__ 310
#endif

typedef _Float16 half;
typedef __bf16 bfloat;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

// ---- traits --------------------------------------------------------------

template <class T, int N> struct vec;

namespace __msl {
template <class T> struct identity { typedef T type; };
template <class T> using nd = typename identity<T>::type; // non-deduced

template <class T> struct is_vec : std::false_type {};
template <class T, int N> struct is_vec<vec<T, N>> : std::true_type {};

template <class T> struct elem { typedef T type; static constexpr int n = 1; };
template <class T, int N> struct elem<vec<T, N>> { typedef T type; static constexpr int n = N; };

template <class T> struct is_float : std::false_type {};
template <> struct is_float<float> : std::true_type {};
template <> struct is_float<half> : std::true_type {};
template <> struct is_float<bfloat> : std::true_type {};
template <> struct is_float<double> : std::true_type {};

template <class T> struct is_scalar : std::integral_constant<bool, std::is_arithmetic<T>::value || is_float<T>::value> {};

template <class T> using if_float = std::enable_if_t<is_float<T>::value, int>;
template <class T> using if_int = std::enable_if_t<std::is_integral<T>::value, int>;
template <class T> using if_scalar = std::enable_if_t<is_scalar<T>::value, int>;

// The type that arithmetic on a and b gives (half stays half with half).
template <class A, class B> using common = decltype(A() + B());

template <class T> constexpr int ncomp() { return elem<std::decay_t<T>>::n; }

template <class T, class A> inline void fill(T *v, int &k, const A &a) {
  if constexpr (is_vec<A>::value) {
    for (int i = 0; i < elem<A>::n; i++) v[k++] = T(a.v[i]);
  } else {
    v[k++] = T(a);
  }
}
} // namespace __msl

// ---- vectors ---------------------------------------------------------------

#define MSL_VEC_BODY(N)                                                                           \
  typedef T value_type;                                                                           \
  vec() = default;                                                                                \
  vec(T s) {                                                                                      \
    for (int i = 0; i < N; i++) v[i] = s;                                                         \
  }                                                                                               \
  template <class U, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>                      \
  explicit vec(const vec<U, N> &o) {                                                              \
    for (int i = 0; i < N; i++) v[i] = T(o.v[i]);                                                 \
  }                                                                                               \
  template <class A, class B, class... R,                                                         \
            std::enable_if_t<__msl::ncomp<A>() + __msl::ncomp<B>() + (0 + ... + __msl::ncomp<R>()) == N, \
                             int> = 0>                                                            \
  vec(const A &a, const B &b, const R &...r) {                                                    \
    int k = 0;                                                                                    \
    __msl::fill(v, k, a);                                                                         \
    __msl::fill(v, k, b);                                                                         \
    (__msl::fill(v, k, r), ...);                                                                  \
  }                                                                                               \
  T &operator[](int i) { return v[i]; }                                                           \
  const T &operator[](int i) const { return v[i]; }                                               \
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
  friend vec operator-(const vec &a) {                                                            \
    vec r;                                                                                        \
    for (int i = 0; i < N; i++) r.v[i] = T(-a.v[i]);                                              \
    return r;                                                                                     \
  }                                                                                               \
  friend vec operator+(const vec &a) { return a; }                                                \
  friend vec operator~(const vec &a) {                                                            \
    vec r;                                                                                        \
    for (int i = 0; i < N; i++) r.v[i] = T(~a.v[i]);                                              \
    return r;                                                                                     \
  }                                                                                               \
  friend vec<bool, N> operator!(const vec &a) {                                                   \
    vec<bool, N> r;                                                                               \
    for (int i = 0; i < N; i++) r.v[i] = !a.v[i];                                                 \
    return r;                                                                                     \
  }                                                                                               \
  vec &operator++() { return *this += T(1); }                                                     \
  vec &operator--() { return *this -= T(1); }

// Hidden friends, so that a scalar of another type converts (float4 * 2).
#define MSL_VEC_ARITH(op, N)                                                                      \
  friend vec operator op(const vec &a, const vec &b) {                                            \
    vec r;                                                                                        \
    for (int i = 0; i < N; i++) r.v[i] = T(a.v[i] op b.v[i]);                                     \
    return r;                                                                                     \
  }                                                                                               \
  friend vec operator op(const vec &a, T b) {                                                     \
    vec r;                                                                                        \
    for (int i = 0; i < N; i++) r.v[i] = T(a.v[i] op b);                                          \
    return r;                                                                                     \
  }                                                                                               \
  friend vec operator op(T a, const vec &b) {                                                     \
    vec r;                                                                                        \
    for (int i = 0; i < N; i++) r.v[i] = T(a op b.v[i]);                                          \
    return r;                                                                                     \
  }                                                                                               \
  vec &operator op##=(const vec &b) {                                                             \
    for (int i = 0; i < N; i++) v[i] = T(v[i] op b.v[i]);                                        \
    return *this;                                                                                 \
  }                                                                                               \
  vec &operator op##=(T b) {                                                                      \
    for (int i = 0; i < N; i++) v[i] = T(v[i] op b);                                              \
    return *this;                                                                                 \
  }

#define MSL_VEC_CMP(op, N)                                                                        \
  friend vec<bool, N> operator op(const vec &a, const vec &b) {                                   \
    vec<bool, N> r;                                                                               \
    for (int i = 0; i < N; i++) r.v[i] = a.v[i] op b.v[i];                                        \
    return r;                                                                                     \
  }                                                                                               \
  friend vec<bool, N> operator op(const vec &a, T b) {                                            \
    vec<bool, N> r;                                                                               \
    for (int i = 0; i < N; i++) r.v[i] = a.v[i] op b;                                             \
    return r;                                                                                     \
  }                                                                                               \
  friend vec<bool, N> operator op(T a, const vec &b) {                                            \
    vec<bool, N> r;                                                                               \
    for (int i = 0; i < N; i++) r.v[i] = a op b.v[i];                                             \
    return r;                                                                                     \
  }

// x, y, z, w are real members (lvalues, addressable); the other swizzles and
// the rgba names are properties generated into msl_swizzle<N>.inc.
template <class T> struct alignas(2 * sizeof(T)) vec<T, 2> {
  union {
    T v[2];
    struct {
      T x, y;
    };
  };
  MSL_VEC_BODY(2)
#include "msl_swizzle2.inc"
};

template <class T> struct alignas(4 * sizeof(T)) vec<T, 3> {
  union {
    T v[3];
    struct {
      T x, y, z;
    };
  };
  MSL_VEC_BODY(3)
#include "msl_swizzle3.inc"
};

template <class T> struct alignas(4 * sizeof(T)) vec<T, 4> {
  union {
    T v[4];
    struct {
      T x, y, z, w;
    };
  };
  MSL_VEC_BODY(4)
#include "msl_swizzle4.inc"
};

#define MSL_VEC_TYPES(T, name)                                                                    \
  typedef vec<T, 2> name##2;                                                                      \
  typedef vec<T, 3> name##3;                                                                      \
  typedef vec<T, 4> name##4;
MSL_VEC_TYPES(float, float)
MSL_VEC_TYPES(half, half)
MSL_VEC_TYPES(bfloat, bfloat)
MSL_VEC_TYPES(int, int)
MSL_VEC_TYPES(uint, uint)
MSL_VEC_TYPES(short, short)
MSL_VEC_TYPES(ushort, ushort)
MSL_VEC_TYPES(char, char)
MSL_VEC_TYPES(uchar, uchar)
MSL_VEC_TYPES(long, long)
MSL_VEC_TYPES(ulong, ulong)
MSL_VEC_TYPES(bool, bool)

// Packed vectors: no padding, element alignment (packed_float3 is 12 bytes).
template <class T, int N> struct packed_vec {
  T v[N];
  packed_vec() = default;
  packed_vec(const vec<T, N> &o) {
    for (int i = 0; i < N; i++) v[i] = o.v[i];
  }
  operator vec<T, N>() const {
    vec<T, N> r;
    for (int i = 0; i < N; i++) r.v[i] = v[i];
    return r;
  }
  T &operator[](int i) { return v[i]; }
  const T &operator[](int i) const { return v[i]; }
};
#define MSL_PACKED_TYPES(T, name)                                                                 \
  typedef packed_vec<T, 2> packed_##name##2;                                                      \
  typedef packed_vec<T, 3> packed_##name##3;                                                      \
  typedef packed_vec<T, 4> packed_##name##4;
MSL_PACKED_TYPES(float, float)
MSL_PACKED_TYPES(half, half)
MSL_PACKED_TYPES(int, int)
MSL_PACKED_TYPES(uint, uint)
MSL_PACKED_TYPES(short, short)
MSL_PACKED_TYPES(ushort, ushort)
MSL_PACKED_TYPES(char, char)
MSL_PACKED_TYPES(uchar, uchar)

// ---- matrices (columns of vectors, as in MSL) ------------------------------

template <class T, int C, int R> struct mat {
  vec<T, R> columns[C];
  mat() = default;
  explicit mat(T d) { // d on the diagonal
    for (int c = 0; c < C; c++) {
      columns[c] = vec<T, R>(T(0));
      if (c < R) columns[c].v[c] = d;
    }
  }
  template <class... V, std::enable_if_t<sizeof...(V) == C && C != 1, int> = 0> mat(const V &...cols) : columns{vec<T, R>(cols)...} {}
  template <class U, std::enable_if_t<!std::is_same<U, T>::value, int> = 0> explicit mat(const mat<U, C, R> &o) {
    for (int c = 0; c < C; c++) columns[c] = vec<T, R>(o.columns[c]);
  }
  vec<T, R> &operator[](int c) { return columns[c]; }
  const vec<T, R> &operator[](int c) const { return columns[c]; }
  friend mat operator+(const mat &a, const mat &b) {
    mat r;
    for (int c = 0; c < C; c++) r.columns[c] = a.columns[c] + b.columns[c];
    return r;
  }
  friend mat operator-(const mat &a, const mat &b) {
    mat r;
    for (int c = 0; c < C; c++) r.columns[c] = a.columns[c] - b.columns[c];
    return r;
  }
  friend mat operator*(const mat &a, T s) {
    mat r;
    for (int c = 0; c < C; c++) r.columns[c] = a.columns[c] * s;
    return r;
  }
  friend mat operator*(T s, const mat &a) { return a * s; }
  friend vec<T, R> operator*(const mat &a, const vec<T, C> &x) {
    vec<T, R> r(T(0));
    for (int c = 0; c < C; c++) r += a.columns[c] * x.v[c];
    return r;
  }
  friend vec<T, C> operator*(const vec<T, R> &x, const mat &a) {
    vec<T, C> r;
    for (int c = 0; c < C; c++) {
      T s = T(0);
      for (int i = 0; i < R; i++) s += x.v[i] * a.columns[c].v[i];
      r.v[c] = s;
    }
    return r;
  }
};
#define MSL_MAT_TYPES(T, name)                                                                    \
  typedef mat<T, 2, 2> name##2x2;                                                                 \
  typedef mat<T, 2, 3> name##2x3;                                                                 \
  typedef mat<T, 2, 4> name##2x4;                                                                 \
  typedef mat<T, 3, 2> name##3x2;                                                                 \
  typedef mat<T, 3, 3> name##3x3;                                                                 \
  typedef mat<T, 3, 4> name##3x4;                                                                 \
  typedef mat<T, 4, 2> name##4x2;                                                                 \
  typedef mat<T, 4, 3> name##4x3;                                                                 \
  typedef mat<T, 4, 4> name##4x4;
MSL_MAT_TYPES(float, float)
MSL_MAT_TYPES(half, half)

// ---- limits and constants ----------------------------------------------------

#define MAXFLOAT __FLT_MAX__
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define HALF_MAX ((half)65504.0f)
#define HALF_MIN ((half)6.103515625e-05f)
#define HALF_EPSILON ((half)0.0009765625f)
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define M_PI_F 3.14159265358979323846f
#define M_PI_H ((half)M_PI_F)
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f
#define M_E_F 2.71828182845904523536f
#define CHAR_BIT 8
#define INT_MAX __INT_MAX__
#define INT_MIN (-__INT_MAX__ - 1)
#define UINT_MAX (__INT_MAX__ * 2U + 1U)
#define SHRT_MAX __SHRT_MAX__
#define USHRT_MAX 65535

namespace metal {

template <class T> struct numeric_limits;
template <> struct numeric_limits<float> {
  static constexpr float max() { return __FLT_MAX__; }
  static constexpr float min() { return __FLT_MIN__; }
  static constexpr float lowest() { return -__FLT_MAX__; }
  static constexpr float epsilon() { return __FLT_EPSILON__; }
  static constexpr float infinity() { return __builtin_inff(); }
  static constexpr float quiet_NaN() { return __builtin_nanf(""); }
};
template <> struct numeric_limits<half> {
  static constexpr half max() { return (half)65504.0f; }
  static constexpr half min() { return (half)6.103515625e-05f; }
  static constexpr half lowest() { return (half)-65504.0f; }
  static constexpr half epsilon() { return (half)0.0009765625f; }
  static constexpr half infinity() { return (half)__builtin_inff(); }
  static constexpr half quiet_NaN() { return (half)__builtin_nanf(""); }
};
#define MSL_INT_LIMITS(T, lo, hi)                                                                 \
  template <> struct numeric_limits<T> {                                                          \
    static constexpr T max() { return hi; }                                                       \
    static constexpr T min() { return lo; }                                                       \
    static constexpr T lowest() { return lo; }                                                    \
  };
MSL_INT_LIMITS(int, (-__INT_MAX__ - 1), __INT_MAX__)
MSL_INT_LIMITS(uint, 0u, (__INT_MAX__ * 2U + 1U))
MSL_INT_LIMITS(short, (short)(-__SHRT_MAX__ - 1), (short)__SHRT_MAX__)
MSL_INT_LIMITS(ushort, (ushort)0, (ushort)65535)
MSL_INT_LIMITS(char, (char)-128, (char)127)
MSL_INT_LIMITS(uchar, (uchar)0, (uchar)255)
MSL_INT_LIMITS(long, (-__LONG_MAX__ - 1), __LONG_MAX__)
MSL_INT_LIMITS(ulong, 0ul, (__LONG_MAX__ * 2UL + 1UL))

template <class To, class From> inline To as_type(const From &x) {
  static_assert(sizeof(To) == sizeof(From), "as_type: the types differ in size");
  return __builtin_bit_cast(To, x);
}

// ---- math ------------------------------------------------------------------
// Floating functions compute in float (half and bfloat convert on the way),
// like the Apple GPU's fast path; MSL has no double.

#define MSL_MAP1(name)                                                                            \
  template <class T, int N> inline vec<T, N> name(const vec<T, N> &x) {                           \
    vec<T, N> r;                                                                                  \
    for (int i = 0; i < N; i++) r.v[i] = name(x.v[i]);                                            \
    return r;                                                                                     \
  }
#define MSL_FLOAT1(name, impl)                                                                    \
  template <class T, __msl::if_float<T> = 0> inline T name(T x) { return T(impl(float(x))); }   \
  MSL_MAP1(name)

MSL_FLOAT1(sqrt, __builtin_sqrtf)
MSL_FLOAT1(exp, __builtin_expf)
MSL_FLOAT1(exp2, __builtin_exp2f)
MSL_FLOAT1(log, __builtin_logf)
MSL_FLOAT1(log2, __builtin_log2f)
MSL_FLOAT1(log10, __builtin_log10f)
MSL_FLOAT1(sin, __builtin_sinf)
MSL_FLOAT1(cos, __builtin_cosf)
MSL_FLOAT1(tan, __builtin_tanf)
MSL_FLOAT1(asin, __builtin_asinf)
MSL_FLOAT1(acos, __builtin_acosf)
MSL_FLOAT1(atan, __builtin_atanf)
MSL_FLOAT1(sinh, __builtin_sinhf)
MSL_FLOAT1(cosh, __builtin_coshf)
MSL_FLOAT1(tanh, __builtin_tanhf)
MSL_FLOAT1(floor, __builtin_floorf)
MSL_FLOAT1(ceil, __builtin_ceilf)
MSL_FLOAT1(trunc, __builtin_truncf)
MSL_FLOAT1(round, __builtin_roundf)
MSL_FLOAT1(rint, __builtin_rintf)
MSL_FLOAT1(fabs, __builtin_fabsf)
MSL_FLOAT1(erf, __builtin_erff)
MSL_FLOAT1(expm1, __builtin_expm1f)
MSL_FLOAT1(log1p, __builtin_log1pf)

inline float __rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
inline float __fract(float x) { return __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f); }
inline float __exp10(float x) { return __builtin_powf(10.0f, x); }
inline float __saturate(float x) { return __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f); }
inline float __sign(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x == 0 ? 0.0f : x; }
MSL_FLOAT1(rsqrt, __rsqrt)
MSL_FLOAT1(fract, __fract)
MSL_FLOAT1(exp10, __exp10)
MSL_FLOAT1(saturate, __saturate)
MSL_FLOAT1(sign, __sign)

template <class T, __msl::if_float<T> = 0> inline bool isnan(T x) { return __builtin_isnan(float(x)); }
template <class T, __msl::if_float<T> = 0> inline bool isinf(T x) { return __builtin_isinf(float(x)); }
template <class T, __msl::if_float<T> = 0> inline bool isfinite(T x) { return __builtin_isfinite(float(x)); }
template <class T, __msl::if_float<T> = 0> inline bool signbit(T x) { return __builtin_signbit(float(x)); }
#define MSL_PRED1(name)                                                                           \
  template <class T, int N> inline vec<bool, N> name(const vec<T, N> &x) {                        \
    vec<bool, N> r;                                                                               \
    for (int i = 0; i < N; i++) r.v[i] = name(x.v[i]);                                            \
    return r;                                                                                     \
  }
MSL_PRED1(isnan)
MSL_PRED1(isinf)
MSL_PRED1(isfinite)
MSL_PRED1(signbit)

template <class T, __msl::if_scalar<T> = 0> inline T abs(T x) {
  if constexpr (__msl::is_float<T>::value)
    return T(__builtin_fabsf(float(x)));
  else
    return x < 0 ? T(-x) : x;
}
MSL_MAP1(abs)

// Binary functions: same-type scalars, mixed scalars (common type), and
// vectors with vectors or scalars.
#define MSL_BINARY(name, impl)                                                                    \
  template <class T, __msl::if_scalar<T> = 0> inline T name(T a, T b) { return impl; }           \
  template <class A, class B,                                                                     \
            std::enable_if_t<!std::is_same<A, B>::value && __msl::is_scalar<A>::value &&          \
                                 __msl::is_scalar<B>::value,                                      \
                             int> = 0>                                                            \
  inline __msl::common<A, B> name(A a0, B b0) {                                                   \
    typedef __msl::common<A, B> T;                                                                \
    T a = T(a0), b = T(b0);                                                                       \
    return impl;                                                                                  \
  }                                                                                               \
  template <class T, int N> inline vec<T, N> name(const vec<T, N> &x, const vec<T, N> &y) {       \
    vec<T, N> r;                                                                                  \
    for (int i = 0; i < N; i++) r.v[i] = name(x.v[i], y.v[i]);                                    \
    return r;                                                                                     \
  }                                                                                               \
  template <class T, int N> inline vec<T, N> name(const vec<T, N> &x, __msl::nd<T> y) {           \
    vec<T, N> r;                                                                                  \
    for (int i = 0; i < N; i++) r.v[i] = name(x.v[i], y);                                         \
    return r;                                                                                     \
  }

MSL_BINARY(max, (a > b || a != a ? a : b))
MSL_BINARY(min, (a < b || a != a ? a : b))
MSL_BINARY(fmax, T(__builtin_fmaxf(float(a), float(b))))
MSL_BINARY(fmin, T(__builtin_fminf(float(a), float(b))))
MSL_BINARY(pow, T(__builtin_powf(float(a), float(b))))
MSL_BINARY(powr, T(__builtin_powf(float(a), float(b))))
MSL_BINARY(atan2, T(__builtin_atan2f(float(a), float(b))))
MSL_BINARY(fmod, T(__builtin_fmodf(float(a), float(b))))
MSL_BINARY(copysign, T(__builtin_copysignf(float(a), float(b))))
MSL_BINARY(step, T(float(b) < float(a) ? 0.0f : 1.0f))
MSL_BINARY(fdim, T(__builtin_fdimf(float(a), float(b))))

template <class T, __msl::if_scalar<T> = 0> inline T clamp(T x, __msl::nd<T> lo, __msl::nd<T> hi) { return min(max(x, lo), hi); }
template <class T, int N> inline vec<T, N> clamp(const vec<T, N> &x, const vec<T, N> &lo, const vec<T, N> &hi) { return min(max(x, lo), hi); }
template <class T, int N> inline vec<T, N> clamp(const vec<T, N> &x, __msl::nd<T> lo, __msl::nd<T> hi) { return min(max(x, lo), hi); }

template <class T, __msl::if_float<T> = 0> inline T fma(T a, __msl::nd<T> b, __msl::nd<T> c) { return T(__builtin_fmaf(float(a), float(b), float(c))); }
template <class T, int N> inline vec<T, N> fma(const vec<T, N> &a, const vec<T, N> &b, const vec<T, N> &c) {
  vec<T, N> r;
  for (int i = 0; i < N; i++) r.v[i] = fma(a.v[i], b.v[i], c.v[i]);
  return r;
}
template <class T, __msl::if_float<T> = 0> inline T mix(T a, __msl::nd<T> b, __msl::nd<T> t) { return a + (b - a) * t; }
template <class T, int N> inline vec<T, N> mix(const vec<T, N> &a, const vec<T, N> &b, const vec<T, N> &t) { return a + (b - a) * t; }
template <class T, int N> inline vec<T, N> mix(const vec<T, N> &a, const vec<T, N> &b, __msl::nd<T> t) { return a + (b - a) * t; }

template <class T, __msl::if_scalar<T> = 0> inline T select(T a, __msl::nd<T> b, bool c) { return c ? b : a; }
template <class T, int N> inline vec<T, N> select(const vec<T, N> &a, const vec<T, N> &b, const vec<bool, N> &c) {
  vec<T, N> r;
  for (int i = 0; i < N; i++) r.v[i] = c.v[i] ? b.v[i] : a.v[i];
  return r;
}
template <class T, int N> inline vec<T, N> select(const vec<T, N> &a, const vec<T, N> &b, bool c) { return c ? b : a; }

template <class T, __msl::if_scalar<T> = 0> inline T dot(T a, T b) { return a * b; }
template <class T, int N> inline T dot(const vec<T, N> &a, const vec<T, N> &b) {
  T s = T(0);
  for (int i = 0; i < N; i++) s += a.v[i] * b.v[i];
  return s;
}
template <class T, int N> inline T length(const vec<T, N> &a) { return sqrt(dot(a, a)); }
template <class T, int N> inline T length_squared(const vec<T, N> &a) { return dot(a, a); }
template <class T, int N> inline vec<T, N> normalize(const vec<T, N> &a) { return a * rsqrt(dot(a, a)); }
template <class T> inline vec<T, 3> cross(const vec<T, 3> &a, const vec<T, 3> &b) {
  return vec<T, 3>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}

template <int N> inline bool all(const vec<bool, N> &b) {
  for (int i = 0; i < N; i++)
    if (!b.v[i]) return false;
  return true;
}
template <int N> inline bool any(const vec<bool, N> &b) {
  for (int i = 0; i < N; i++)
    if (b.v[i]) return true;
  return false;
}
inline bool all(bool b) { return b; }
inline bool any(bool b) { return b; }

template <class T, __msl::if_int<T> = 0> inline T popcount(T x) { return T(__builtin_popcountll((unsigned long long)std::make_unsigned_t<T>(x))); }
template <class T, __msl::if_int<T> = 0> inline T clz(T x) {
  typedef std::make_unsigned_t<T> U;
  U u = U(x);
  return u == 0 ? T(sizeof(T) * 8) : T(__builtin_clzll((unsigned long long)u) - (64 - sizeof(T) * 8));
}
template <class T, __msl::if_int<T> = 0> inline T ctz(T x) {
  typedef std::make_unsigned_t<T> U;
  U u = U(x);
  return u == 0 ? T(sizeof(T) * 8) : T(__builtin_ctzll((unsigned long long)u));
}
template <class T, __msl::if_int<T> = 0> inline T mulhi(T a, T b) {
  return T(((__int128)a * (__int128)b) >> (sizeof(T) * 8));
}
MSL_MAP1(popcount)
MSL_MAP1(clz)
MSL_MAP1(ctz)

// Apple's fast:: and precise:: variants are the same functions here.
namespace fast {
using namespace metal;
}
namespace precise {
using namespace metal;
}

// ---- atomics ----------------------------------------------------------------
// Real atomics: threadgroups run on several OS threads at once.

enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel, memory_order_seq_cst };
template <class T> struct _atomic {
  T __v;
};
template <class T> using atomic = _atomic<T>;
typedef _atomic<int> atomic_int;
typedef _atomic<uint> atomic_uint;
typedef _atomic<bool> atomic_bool;
typedef _atomic<float> atomic_float;
typedef _atomic<ulong> atomic_ulong;

template <class T> inline T atomic_load_explicit(const volatile _atomic<T> *o, memory_order) {
  T r;
  __atomic_load((T *)&o->__v, &r, __ATOMIC_SEQ_CST);
  return r;
}
template <class T> inline void atomic_store_explicit(volatile _atomic<T> *o, __msl::nd<T> v, memory_order) {
  __atomic_store((T *)&o->__v, &v, __ATOMIC_SEQ_CST);
}
template <class T> inline T atomic_exchange_explicit(volatile _atomic<T> *o, __msl::nd<T> v, memory_order) {
  T r;
  __atomic_exchange((T *)&o->__v, &v, &r, __ATOMIC_SEQ_CST);
  return r;
}
template <class T>
inline bool atomic_compare_exchange_weak_explicit(volatile _atomic<T> *o, T *expected, __msl::nd<T> desired, memory_order, memory_order) {
  return __atomic_compare_exchange((T *)&o->__v, expected, &desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
#define MSL_ATOMIC_RMW(name, expr)                                                                \
  template <class T> inline T atomic_fetch_##name##_explicit(volatile _atomic<T> *o, __msl::nd<T> v, memory_order) { \
    T old = atomic_load_explicit(o, memory_order_relaxed);                                        \
    for (;;) {                                                                                    \
      T nv = expr;                                                                                \
      if (__atomic_compare_exchange((T *)&o->__v, &old, &nv, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return old; \
    }                                                                                             \
  }
MSL_ATOMIC_RMW(add, T(old + v))
MSL_ATOMIC_RMW(sub, T(old - v))
MSL_ATOMIC_RMW(max, (v > old ? v : old))
MSL_ATOMIC_RMW(min, (v < old ? v : old))
MSL_ATOMIC_RMW(and, T(old & v))
MSL_ATOMIC_RMW(or, T(old | v))
MSL_ATOMIC_RMW(xor, T(old ^ v))

// ---- barriers and simd collectives (switch points) --------------------------

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4, mem_threadgroup_imageblock = 8 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(int(a) | int(b)); }

#define MSL_LOC_PARAMS const char *__file = __builtin_FILE(), int __line = __builtin_LINE(), int __col = __builtin_COLUMN()
#define MSL_LOC (msl_loc{__file, __line, __col})

inline void threadgroup_barrier(mem_flags, MSL_LOC_PARAMS) { msl_barrier(MSL_LOC); }
inline void simdgroup_barrier(mem_flags, MSL_LOC_PARAMS) {
  uint32_t mask;
  msl_collective(MSL_SIMDGROUP_BARRIER, nullptr, 0, MSL_LOC, &mask);
}

struct simd_vote {
  typedef uint64_t vote_t;
  vote_t bits;
  explicit simd_vote(vote_t b = 0) : bits(b) {}
  explicit operator vote_t() const { return bits; }
  bool all() const { return bits == ((uint64_t)1 << msl_current->threads_per_simdgroup) - 1; }
  bool any() const { return bits != 0; }
};

namespace __collective {
template <class T> inline T load(const unsigned char *slots, int lane) {
  T v;
  __builtin_memcpy(&v, slots + lane * MSL_SLOT_BYTES, sizeof(T));
  return v;
}
// Metal leaves a read from an inactive lane undefined: all bits set (NaN
// for every float type) makes it show.
template <class T> inline T poison() {
  T v;
  __builtin_memset(&v, 0xff, sizeof(T));
  return v;
}
template <class T> inline const unsigned char *go(int kind, const T &x, msl_loc loc, uint32_t *mask) {
  static_assert(sizeof(T) <= MSL_SLOT_BYTES, "simd collective on a type larger than 64 bytes");
  return msl_collective(kind, &x, sizeof(T), loc, mask);
}
template <class T> inline T shuffle(int kind, const T &x, int src, msl_loc loc) {
  uint32_t mask;
  const unsigned char *s = go(kind, x, loc, &mask);
  if (src < 0 || src >= 32 || !(mask >> src & 1)) return poison<T>();
  return load<T>(s, src);
}
template <class T> inline T maxv(const T &a, const T &b) { return max(a, b); }
template <class T> inline T minv(const T &a, const T &b) { return min(a, b); }
} // namespace __collective

#define MSL_REDUCE(name, kind, combine)                                                           \
  template <class T> inline T name(T x, MSL_LOC_PARAMS) {                                         \
    uint32_t mask;                                                                                \
    const unsigned char *s = __collective::go(kind, x, MSL_LOC, &mask);                           \
    bool first = true;                                                                            \
    T r = x;                                                                                      \
    for (int l = 0; l < 32; l++) {                                                                \
      if (!(mask >> l & 1)) continue;                                                             \
      T v = __collective::load<T>(s, l);                                                          \
      if (first) {                                                                                \
        r = v;                                                                                    \
        first = false;                                                                            \
      } else {                                                                                    \
        r = combine;                                                                              \
      }                                                                                           \
    }                                                                                             \
    return r;                                                                                     \
  }
MSL_REDUCE(simd_sum, MSL_SIMD_SUM, r + v)
MSL_REDUCE(simd_product, MSL_SIMD_PRODUCT, r * v)
MSL_REDUCE(simd_max, MSL_SIMD_MAX, __collective::maxv(r, v))
MSL_REDUCE(simd_min, MSL_SIMD_MIN, __collective::minv(r, v))
MSL_REDUCE(simd_and, MSL_SIMD_AND, r & v)
MSL_REDUCE(simd_or, MSL_SIMD_OR, r | v)
MSL_REDUCE(simd_xor, MSL_SIMD_XOR, r ^ v)

#define MSL_PREFIX(name, kind, op, inclusive)                                                     \
  template <class T> inline T name(T x, MSL_LOC_PARAMS) {                                         \
    uint32_t mask;                                                                                \
    const unsigned char *s = __collective::go(kind, x, MSL_LOC, &mask);                           \
    int me = int(msl_current->thread_index_in_simdgroup);                                         \
    T r = T(kind == MSL_SIMD_PREFIX_EXCLUSIVE_PRODUCT || kind == MSL_SIMD_PREFIX_INCLUSIVE_PRODUCT ? 1 : 0); \
    for (int l = 0; l < (inclusive ? me + 1 : me); l++)                                           \
      if (mask >> l & 1) r = r op __collective::load<T>(s, l);                                    \
    return r;                                                                                     \
  }
MSL_PREFIX(simd_prefix_inclusive_sum, MSL_SIMD_PREFIX_INCLUSIVE_SUM, +, true)
MSL_PREFIX(simd_prefix_exclusive_sum, MSL_SIMD_PREFIX_EXCLUSIVE_SUM, +, false)
MSL_PREFIX(simd_prefix_inclusive_product, MSL_SIMD_PREFIX_INCLUSIVE_PRODUCT, *, true)
MSL_PREFIX(simd_prefix_exclusive_product, MSL_SIMD_PREFIX_EXCLUSIVE_PRODUCT, *, false)

template <class T> inline T simd_shuffle(T x, ushort lane, MSL_LOC_PARAMS) { return __collective::shuffle(MSL_SIMD_SHUFFLE, x, lane, MSL_LOC); }
template <class T> inline T simd_broadcast(T x, ushort lane, MSL_LOC_PARAMS) { return __collective::shuffle(MSL_SIMD_BROADCAST, x, lane, MSL_LOC); }
template <class T> inline T simd_shuffle_xor(T x, ushort m, MSL_LOC_PARAMS) {
  return __collective::shuffle(MSL_SIMD_SHUFFLE_XOR, x, int(msl_current->thread_index_in_simdgroup ^ m), MSL_LOC);
}
// The lanes whose source falls off the simdgroup keep their own value.
template <class T> inline T simd_shuffle_down(T x, ushort d, MSL_LOC_PARAMS) {
  int src = int(msl_current->thread_index_in_simdgroup) + d;
  T r = __collective::shuffle(MSL_SIMD_SHUFFLE_DOWN, x, src, MSL_LOC);
  return src < int(msl_current->threads_per_simdgroup) ? r : x;
}
template <class T> inline T simd_shuffle_up(T x, ushort d, MSL_LOC_PARAMS) {
  int src = int(msl_current->thread_index_in_simdgroup) - d;
  T r = __collective::shuffle(MSL_SIMD_SHUFFLE_UP, x, src, MSL_LOC);
  return src >= 0 ? r : x;
}
template <class T> inline T simd_shuffle_rotate_down(T x, ushort d, MSL_LOC_PARAMS) {
  int w = int(msl_current->threads_per_simdgroup);
  return __collective::shuffle(MSL_SIMD_SHUFFLE_ROTATE_DOWN, x, (int(msl_current->thread_index_in_simdgroup) + d) % w, MSL_LOC);
}
template <class T> inline T simd_shuffle_rotate_up(T x, ushort d, MSL_LOC_PARAMS) {
  int w = int(msl_current->threads_per_simdgroup);
  return __collective::shuffle(MSL_SIMD_SHUFFLE_ROTATE_UP, x, ((int(msl_current->thread_index_in_simdgroup) - d) % w + w) % w, MSL_LOC);
}
template <class T> inline T simd_broadcast_first(T x, MSL_LOC_PARAMS) {
  uint32_t mask;
  const unsigned char *s = __collective::go(MSL_SIMD_BROADCAST_FIRST, x, MSL_LOC, &mask);
  return __collective::load<T>(s, __builtin_ctz(mask));
}
inline bool simd_all(bool b, MSL_LOC_PARAMS) {
  uint32_t mask;
  const unsigned char *s = __collective::go(MSL_SIMD_ALL, b, MSL_LOC, &mask);
  for (int l = 0; l < 32; l++)
    if ((mask >> l & 1) && !__collective::load<bool>(s, l)) return false;
  return true;
}
inline bool simd_any(bool b, MSL_LOC_PARAMS) {
  uint32_t mask;
  const unsigned char *s = __collective::go(MSL_SIMD_ANY, b, MSL_LOC, &mask);
  for (int l = 0; l < 32; l++)
    if ((mask >> l & 1) && __collective::load<bool>(s, l)) return true;
  return false;
}
inline simd_vote simd_ballot(bool b, MSL_LOC_PARAMS) {
  uint32_t mask;
  const unsigned char *s = __collective::go(MSL_SIMD_BALLOT, b, MSL_LOC, &mask);
  uint64_t bits = 0;
  for (int l = 0; l < 32; l++)
    if ((mask >> l & 1) && __collective::load<bool>(s, l)) bits |= (uint64_t)1 << l;
  return simd_vote(bits);
}
inline simd_vote simd_active_threads_mask(MSL_LOC_PARAMS) {
  uint32_t mask;
  __collective::go(MSL_SIMD_ACTIVE_THREADS_MASK, 0, MSL_LOC, &mask);
  return simd_vote(mask);
}
inline bool simd_is_first(MSL_LOC_PARAMS) {
  uint32_t mask;
  __collective::go(MSL_SIMD_IS_FIRST, 0, MSL_LOC, &mask);
  return int(msl_current->thread_index_in_simdgroup) == __builtin_ctz(mask);
}

// ---- simdgroup matrices ---------------------------------------------------------
// An 8x8 matrix held by a whole simdgroup, two elements per lane in Apple's
// layout (thread_elements(): row fm, columns fn and fn+1 of the lane, as
// MLX's steel kernels read them). Load, store and the products are simd
// collectives of all 32 lanes (Metal requires the whole simdgroup), so each
// happens for the simdgroup at one instant: a load reads before any lane
// goes on past it, a store has written when any lane goes on. A plain write
// by one lane that another lane's load reads still needs a barrier (it shows
// as a difference between the two thread orders).
//
// Products: d[m][n] = c[m][n] + Σ_k a[m][k]·b[k][n], in float, k from 0 to
// 7, one fma each (acc = fma(a, b, acc)), rounded to d's type once at the
// end; simdgroup_multiply starts from -0 (so the first fma is the plain
// product). Apple does not document its order; this one makes a chain of
// products over k blocks equal a plain fma loop over k.
namespace __sgm {
inline int lane() { return int(msl_current->thread_index_in_simdgroup); }
inline int row(int l) { return ((l >> 2) & 4) + ((l >> 1) & 3); }
inline int col(int l) { return ((l >> 2) & 2) * 2 + (l & 1) * 2; }
inline void full(uint32_t mask, const char *op, msl_loc loc) {
  if (mask != 0xffffffffu)
    msl_fail(loc.file, loc.line, "%s with lanes 0x%08x active: a simdgroup matrix needs all 32 lanes", op, mask);
}
} // namespace __sgm

template <class T, int Cols, int Rows = Cols> struct simdgroup_matrix {
  static_assert(Cols == 8 && Rows == 8, "only 8x8 simdgroup matrices");
  vec<T, 2> __e;
  simdgroup_matrix() = default;
  // A diagonal matrix of d (MSL's simdgroup_matrix(T)).
  explicit simdgroup_matrix(T d) {
    int l = __sgm::lane(), m = __sgm::row(l), n = __sgm::col(l);
    __e.v[0] = m == n ? d : T(0);
    __e.v[1] = m == n + 1 ? d : T(0);
  }
  vec<T, 2> &thread_elements() { return __e; }
  const vec<T, 2> &thread_elements() const { return __e; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <class T, int Cols, int Rows = Cols> inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(__msl::nd<T> v) {
  simdgroup_matrix<T, Cols, Rows> r;
  r.__e = vec<T, 2>(v);
  return r;
}

// Element (r, c) is src[(origin.y + r)·elements_per_row + origin.x + c], or
// with transpose src[(origin.y + c)·elements_per_row + origin.x + r]: the
// origin is (column, row) in the memory's matrix.
template <class T, int C, int R>
inline void simdgroup_load(simdgroup_matrix<T, C, R> &d, const __msl::nd<T> *src, ulong elements_per_row = C, ulong2 matrix_origin = 0,
                           bool transpose_matrix = false, MSL_LOC_PARAMS) {
  int l = __sgm::lane(), m = __sgm::row(l), n = __sgm::col(l);
  for (int i = 0; i < 2; i++) {
    ulong r = transpose_matrix ? ulong(n + i) : ulong(m), c = transpose_matrix ? ulong(m) : ulong(n + i);
    d.__e.v[i] = src[(matrix_origin.y + r) * elements_per_row + matrix_origin.x + c];
  }
  uint32_t mask;
  msl_collective(MSL_SIMDGROUP_LOAD, nullptr, 0, MSL_LOC, &mask);
  __sgm::full(mask, "simdgroup_load", MSL_LOC);
}

template <class T, int C, int R>
inline void simdgroup_store(const simdgroup_matrix<T, C, R> &a, __msl::nd<T> *dst, ulong elements_per_row = C, ulong2 matrix_origin = 0,
                            bool transpose_matrix = false, MSL_LOC_PARAMS) {
  int l = __sgm::lane(), m = __sgm::row(l), n = __sgm::col(l);
  for (int i = 0; i < 2; i++) {
    ulong r = transpose_matrix ? ulong(n + i) : ulong(m), c = transpose_matrix ? ulong(m) : ulong(n + i);
    dst[(matrix_origin.y + r) * elements_per_row + matrix_origin.x + c] = a.__e.v[i];
  }
  uint32_t mask;
  msl_collective(MSL_SIMDGROUP_STORE, nullptr, 0, MSL_LOC, &mask);
  __sgm::full(mask, "simdgroup_store", MSL_LOC);
}

namespace __sgm {
struct operands {
  float a[2], b[2];
};
// d = c0 + a·b for this lane's two elements; c0 is -0 or c's elements.
template <class TD, class TA, class TB>
inline void product(simdgroup_matrix<TD, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a, const simdgroup_matrix<TB, 8, 8> &b, float c0,
                    float c1, const char *op, msl_loc loc) {
  operands mine = {{float(a.__e.v[0]), float(a.__e.v[1])}, {float(b.__e.v[0]), float(b.__e.v[1])}};
  uint32_t mask;
  const unsigned char *s = msl_collective(MSL_SIMDGROUP_MULTIPLY, &mine, sizeof mine, loc, &mask);
  full(mask, op, loc);
  float A[8][8], B[8][8];
  for (int l = 0; l < 32; l++) {
    operands o;
    __builtin_memcpy(&o, s + l * MSL_SLOT_BYTES, sizeof o);
    for (int i = 0; i < 2; i++) {
      A[row(l)][col(l) + i] = o.a[i];
      B[row(l)][col(l) + i] = o.b[i];
    }
  }
  int l = lane(), m = row(l), n = col(l);
  float acc[2] = {c0, c1};
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 8; k++) acc[i] = __builtin_fmaf(A[m][k], B[k][n + i], acc[i]);
  d.__e.v[0] = TD(acc[0]);
  d.__e.v[1] = TD(acc[1]);
}
} // namespace __sgm

template <class TD, class TA, class TB, class TC>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<TD, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a, const simdgroup_matrix<TB, 8, 8> &b,
                                          const simdgroup_matrix<TC, 8, 8> &c, MSL_LOC_PARAMS) {
  __sgm::product(d, a, b, float(c.__e.v[0]), float(c.__e.v[1]), "simdgroup_multiply_accumulate", MSL_LOC);
}
template <class TD, class TA, class TB>
inline void simdgroup_multiply(simdgroup_matrix<TD, 8, 8> &d, const simdgroup_matrix<TA, 8, 8> &a, const simdgroup_matrix<TB, 8, 8> &b,
                               MSL_LOC_PARAMS) {
  __sgm::product(d, a, b, -0.0f, -0.0f, "simdgroup_multiply", MSL_LOC);
}

} // namespace metal

// ---- kernel arguments (written into kernel signatures by the pre-pass) ------

namespace __msl {
enum builtin_id {
  thread_position_in_grid,
  thread_position_in_threadgroup,
  threadgroup_position_in_grid,
  threads_per_threadgroup,
  threadgroups_per_grid,
  threads_per_grid,
  thread_index_in_threadgroup,
  thread_index_in_simdgroup,
  simdgroup_index_in_threadgroup,
  simdgroups_per_threadgroup,
  threads_per_simdgroup,
};

template <class T> inline T from3(const uint32_t *p) {
  if constexpr (is_vec<T>::value) {
    T r;
    for (int i = 0; i < elem<T>::n; i++) r.v[i] = typename elem<T>::type(i < 3 ? p[i] : 0);
    return r;
  } else {
    return T(p[0]);
  }
}

template <class T> inline T builtin(builtin_id id) {
  const msl_thread *t = msl_current;
  switch (id) {
  case thread_position_in_grid: return from3<T>(t->thread_position_in_grid);
  case thread_position_in_threadgroup: return from3<T>(t->thread_position_in_threadgroup);
  case threadgroup_position_in_grid: return from3<T>(t->threadgroup_position_in_grid);
  case threads_per_threadgroup: return from3<T>(t->threads_per_threadgroup);
  case threadgroups_per_grid: return from3<T>(t->threadgroups_per_grid);
  case threads_per_grid: return from3<T>(t->threads_per_grid);
  case thread_index_in_threadgroup: return from3<T>(&t->thread_index_in_threadgroup);
  case thread_index_in_simdgroup: return from3<T>(&t->thread_index_in_simdgroup);
  case simdgroup_index_in_threadgroup: return from3<T>(&t->simdgroup_index_in_threadgroup);
  case simdgroups_per_threadgroup: return from3<T>(&t->simdgroups_per_threadgroup);
  case threads_per_simdgroup: return from3<T>(&t->threads_per_simdgroup);
  }
  return T();
}

// [[buffer(i)]]: a pointer, or a reference (constant Args &args).
template <class T> inline T buffer(int index, const char *file, int line) {
  void *p = msl_buffer(index, file, line);
  if constexpr (std::is_reference<T>::value) {
    return *(std::remove_reference_t<T> *)p;
  } else {
    static_assert(std::is_pointer<T>::value, "a [[buffer(i)]] argument must be a pointer or a reference");
    return (T)p;
  }
}

// [[threadgroup(i)]]: a pointer to this threadgroup's argument memory.
template <class T> inline T threadgroup_arg(int index, const char *file, int line) {
  static_assert(std::is_pointer<T>::value, "a [[threadgroup(i)]] argument must be a pointer");
  return (T)msl_threadgroup_arg(index, file, line);
}

// A kernel-local `threadgroup T x;`: one object per threadgroup.
template <class T> inline T *threadgroup_local(int id, const char *file, int line) {
  return (T *)msl_threadgroup_local(id, sizeof(T), alignof(T), file, line);
}

struct kernel_reg {
  kernel_reg(const char *name, void (*fn)(void), const char *file, int line, int max_threads) {
    msl_register_kernel(name, fn, file, line, max_threads);
  }
};
struct constant_reg {
  constant_reg(int index, const char *name, void *p, size_t size, bool *defined, const char *type, const char *file, int line) {
    msl_register_constant(index, name, p, size, defined, type, file, line);
  }
};
struct derived_reg {
  derived_reg(void (*fn)(void)) { msl_register_derived(fn); }
};
} // namespace __msl

#define is_function_constant_defined(name) (__msl_fcdef_##name)

// ---- the MSL keywords ---------------------------------------------------------
// Address spaces are plain memory here; the pre-pass has already rewritten
// what these macros cannot express (kernel-local threadgroup variables,
// argument attributes, function constants).
#define device
#define thread
#define threadgroup
#define threadgroup_imageblock
#define kernel
#define constant const

#endif
