// A prototype of the decode attention design the README proposes for GQA 8
// (not a .metal kernel): the 8 query heads of a kv head as the columns of
// tensor-core products, S^T = K·Q^T and O^T = V^T·P^T with
// mma.sync.m16n8k16 (f16 in, f32 accumulate), q4 codes turned into halves
// in registers (no dequantization: each 32-element group's product is
// scaled by the token's group scale after the mma, and the bias enters
// through Σq' as the qdot identity has it; for V the scale is folded into
// P and the bias is a separate per-group sum). The cache layout is the
// Metal backend's (q4, gs 32: D/8 words per slot, then {scale, bias}
// halves per group). The same function on Apple GPUs is simdgroup_matrix.
//
//   attn_mma N SPLITS ITERS [smem]
//       check against a float reference, then time (L2 flushed before each
//       repetition); smem: the variant that stages K/V in shared memory
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                \
      exit(2);                                                                                    \
    }                                                                                             \
  } while (0)

constexpr int D = 128, G = 8, KVH = 8, HQ = G * KVH, GS = 32, NG = D / GS, WORDS = D / 8;
#ifndef WARPS
#define WARPS 4 // warps per threadgroup
#endif
#ifndef MINB
#define MINB 1 // threadgroups per SM the registers must allow
#endif
constexpr float NEG = -1e30f;

__device__ __forceinline__ unsigned h2u(__half2 h) { return *reinterpret_cast<unsigned *>(&h); }
__device__ __forceinline__ __half2 u2h(unsigned u) { return *reinterpret_cast<__half2 *>(&u); }

// Two 4-bit codes (lo, hi) as a half2 of their values: 1024 + n, less 1024.
__device__ __forceinline__ unsigned codes2(unsigned lo, unsigned hi) {
  const unsigned x = (lo & 15u) | ((hi & 15u) << 16) | 0x64006400u;
  return h2u(__hsub2(u2h(x), __halves2half2(__ushort_as_half(0x6400), __ushort_as_half(0x6400))));
}

__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Pass 1: grid (kv head, split), WARPS warps; each warp walks 16-token
// tiles of the split. Lane (g = lane/4, t = lane%4) holds scores of tokens
// g, g+8 for heads 2t, 2t+1 and O^T of dims 16m+g, 16m+g+8 for heads 2t,
// 2t+1.
__global__ void __launch_bounds__(WARPS * 32, MINB) attn_q4_mma(const float *q, const uint4 *kc, const uint4 *km, const uint4 *vc,
                                                          const uint4 *vm, int ctx, int n, int chunk, int splits, float qscale,
                                                          float *part_o, float *part_ml) {
  __shared__ __half qh[G][D + 8];
  __shared__ float qsum[G][NG];
  __shared__ float sm_o[WARPS][G][D];
  __shared__ float sm_ml[WARPS][G][2];
  const int kvh = blockIdx.x, split = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int t0 = split * chunk, t1 = min(n, t0 + chunk);
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) qh[i / D][i % D] = __float2half(q[(kvh * G) * D + i] * qscale);
  __syncthreads();
  for (int i = threadIdx.x; i < G * NG; i += blockDim.x) {
    float s = 0;
    for (int e = 0; e < GS; e++) s += __half2float(qh[i / NG][(i % NG) * GS + e]);
    qsum[i / NG][i % NG] = s;
  }
  // B fragments of Q^T for the 8 k-steps: (k = dim, n = head g).
  unsigned qb[8][2];
#pragma unroll
  for (int kk = 0; kk < 8; kk++) {
    qb[kk][0] = h2u(*reinterpret_cast<const __half2 *>(&qh[g][16 * kk + 2 * t]));
    qb[kk][1] = h2u(*reinterpret_cast<const __half2 *>(&qh[g][16 * kk + 2 * t + 8]));
  }
  __syncthreads();
  float qs[2][NG];
#pragma unroll
  for (int j = 0; j < 2; j++)
#pragma unroll
    for (int gr = 0; gr < NG; gr++) qs[j][gr] = qsum[2 * t + j][gr];

  float m[2] = {NEG, NEG}, l[2] = {0, 0};
  float o[8][4];
#pragma unroll
  for (int i = 0; i < 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0;
  float ob[NG] = {0, 0, 0, 0}; // Σ b_V·p of head g per group
  const size_t base = (size_t)kvh * ctx;

  for (int b = t0 + 16 * warp; b < t1; b += 16 * WARPS) {
    // ---- scores: S^T (16 tokens x 8 heads), one accumulator per group ----
    const int ta = min(b + g, t1 - 1), tb = min(b + g + 8, t1 - 1);
    const uint4 *ka = kc + (base + ta) * (WORDS / 4), *kb = kc + (base + tb) * (WORDS / 4);
    float s[4] = {0, 0, 0, 0};
    const uint4 ma = km[base + ta], mb = km[base + tb]; // 4 half2 {scale, bias}
    const unsigned mwa[4] = {ma.x, ma.y, ma.z, ma.w}, mwb[4] = {mb.x, mb.y, mb.z, mb.w};
#pragma unroll
    for (int gr = 0; gr < NG; gr++) {
      const uint4 wa = ka[gr], wb = kb[gr]; // words 4gr..4gr+3: dims 32gr..32gr+31
      float c[4] = {0, 0, 0, 0};
      const unsigned xa[4] = {wa.x, wa.y, wa.z, wa.w}, xb[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
      for (int h = 0; h < 2; h++) { // k-step 2gr+h: words 2h, 2h+1 of the group
        const unsigned sh = 8 * t;
        unsigned a[4];
        a[0] = codes2(xa[2 * h] >> sh, xa[2 * h] >> (sh + 4));
        a[1] = codes2(xb[2 * h] >> sh, xb[2 * h] >> (sh + 4));
        a[2] = codes2(xa[2 * h + 1] >> sh, xa[2 * h + 1] >> (sh + 4));
        a[3] = codes2(xb[2 * h + 1] >> sh, xb[2 * h + 1] >> (sh + 4));
        mma16816(c, a, qb[2 * gr + h][0], qb[2 * gr + h][1]);
      }
      const float2 sba = __half22float2(u2h(mwa[gr])), sbb = __half22float2(u2h(mwb[gr]));
      s[0] += sba.x * c[0] + sba.y * qs[0][gr];
      s[1] += sba.x * c[1] + sba.y * qs[1][gr];
      s[2] += sbb.x * c[2] + sbb.y * qs[0][gr];
      s[3] += sbb.x * c[3] + sbb.y * qs[1][gr];
    }
    if (b + g >= t1) s[0] = s[1] = NEG;
    if (b + g + 8 >= t1) s[2] = s[3] = NEG;
    // ---- online softmax per head (2t, 2t+1), over the 16 tokens (lanes g) ----
    float alpha[2], p[4];
#pragma unroll
    for (int j = 0; j < 2; j++) {
      float mx = fmaxf(s[j], s[2 + j]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float mn = fmaxf(m[j], mx);
      alpha[j] = exp2f(m[j] - mn);
      p[j] = exp2f(s[j] - mn);
      p[2 + j] = exp2f(s[2 + j] - mn);
      float sum = p[j] + p[2 + j];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      l[j] = l[j] * alpha[j] + sum;
      m[j] = mn;
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
      o[i][0] *= alpha[0], o[i][1] *= alpha[1], o[i][2] *= alpha[0], o[i][3] *= alpha[1];
    }
    // This lane's B rows: P[head g][tokens 2t, 2t+1, 2t+8, 2t+9], from the
    // lanes that hold them (token row r = 2t+i at lane r*4 + g/2).
    float pt[4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int src = (2 * t + i) * 4 + g / 2;
      const float lo0 = __shfl_sync(0xffffffffu, p[0], src), lo1 = __shfl_sync(0xffffffffu, p[1], src);
      const float hi0 = __shfl_sync(0xffffffffu, p[2], src), hi1 = __shfl_sync(0xffffffffu, p[3], src);
      pt[i] = (g & 1) ? lo1 : lo0;
      pt[2 + i] = (g & 1) ? hi1 : hi0;
    }
    // alpha of head g, from a lane with t = g/2.
    const float a0 = __shfl_sync(0xffffffffu, alpha[0], g / 2), a1 = __shfl_sync(0xffffffffu, alpha[1], g / 2);
    const float ag = (g & 1) ? a1 : a0;
    // ---- O^T += V^T · P^T: tokens 2t, 2t+1, 2t+8, 2t+9 of the tile ----
    int tok[4];
#pragma unroll
    for (int i = 0; i < 4; i++) tok[i] = min(b + 2 * t + (i & 1) + 8 * (i >> 1), t1 - 1);
    float sv[4][NG];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint4 mv = vm[base + tok[i]];
      const unsigned w[4] = {mv.x, mv.y, mv.z, mv.w};
#pragma unroll
      for (int gr = 0; gr < NG; gr++) {
        const float2 sb = __half22float2(u2h(w[gr]));
        sv[i][gr] = sb.x;
        ob[gr] = (i == 0 ? ob[gr] * ag : ob[gr]) + sb.y * pt[i];
      }
    }
#pragma unroll
    for (int gr = 0; gr < NG; gr++) { // m-tiles 2gr, 2gr+1: dims 32gr..32gr+31
      const unsigned b0 = h2u(__floats2half2_rn(sv[0][gr] * pt[0], sv[1][gr] * pt[1]));
      const unsigned b1 = h2u(__floats2half2_rn(sv[2][gr] * pt[2], sv[3][gr] * pt[3]));
      uint4 x[4];
#pragma unroll
      for (int i = 0; i < 4; i++) x[i] = vc[(base + tok[i]) * (WORDS / 4) + gr];
#pragma unroll
      for (int h = 0; h < 2; h++) { // m-tile 2gr+h: words 2h (dims +g) and 2h+1 (dims +g+8)
        const unsigned sh = 4 * g;
        const unsigned w0[4] = {h ? x[0].z : x[0].x, h ? x[1].z : x[1].x, h ? x[2].z : x[2].x, h ? x[3].z : x[3].x};
        const unsigned w1[4] = {h ? x[0].w : x[0].y, h ? x[1].w : x[1].y, h ? x[2].w : x[2].y, h ? x[3].w : x[3].y};
        unsigned a[4];
        a[0] = codes2(w0[0] >> sh, w0[1] >> sh); // dim 16m+g, tokens 2t, 2t+1
        a[1] = codes2(w1[0] >> sh, w1[1] >> sh); // dim 16m+g+8
        a[2] = codes2(w0[2] >> sh, w0[3] >> sh); // dim 16m+g, tokens 2t+8, 2t+9
        a[3] = codes2(w1[2] >> sh, w1[3] >> sh);
        mma16816(o[2 * gr + h], a, b0, b1);
      }
    }
  }
  // ob: sum over the 4 lanes (t) that share head g.
#pragma unroll
  for (int gr = 0; gr < NG; gr++) {
    ob[gr] += __shfl_xor_sync(0xffffffffu, ob[gr], 1);
    ob[gr] += __shfl_xor_sync(0xffffffffu, ob[gr], 2);
  }
  // ---- merge the warps ----
#pragma unroll
  for (int i = 0; i < 8; i++) {
    sm_o[warp][2 * t][16 * i + g] = o[i][0];
    sm_o[warp][2 * t + 1][16 * i + g] = o[i][1];
    sm_o[warp][2 * t][16 * i + g + 8] = o[i][2];
    sm_o[warp][2 * t + 1][16 * i + g + 8] = o[i][3];
  }
  __syncthreads();
  if (t == 0) {
    for (int d = 0; d < D; d++) sm_o[warp][g][d] += ob[d / GS];
  }
  if (g == 0) {
    sm_ml[warp][2 * t][0] = m[0], sm_ml[warp][2 * t][1] = l[0];
    sm_ml[warp][2 * t + 1][0] = m[1], sm_ml[warp][2 * t + 1][1] = l[1];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    const int h = i / D, d = i % D;
    float M = NEG;
    for (int w = 0; w < WARPS; w++) M = fmaxf(M, sm_ml[w][h][0]);
    float acc = 0, L = 0;
    for (int w = 0; w < WARPS; w++) {
      const float wt = exp2f(sm_ml[w][h][0] - M);
      acc += wt * sm_o[w][h][d];
      L += wt * sm_ml[w][h][1];
    }
    const int part = (kvh * G + h) * splits + split;
    part_o[(size_t)part * D + d] = acc;
    if (d == 0) part_ml[2 * part] = M, part_ml[2 * part + 1] = L;
  }
}


// The same with the K/V tiles staged in shared memory by cp.async, two
// stages in flight: every warp of the threadgroup takes 16 tokens of a
// stage of 16·WARPS. Rows are 80 bytes apart (64 used) so that the 8 rows a
// fragment read touches fall in different banks.
constexpr int ROWW = 20; // words per staged row
__device__ __forceinline__ void cp16(void *dst, const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait1() { asm volatile("cp.async.wait_group 1;\n" ::); }

__global__ void __launch_bounds__(WARPS * 32, MINB) attn_q4_mma_smem(const float *q, const uint4 *kc, const uint4 *km, const uint4 *vc,
                                                                     const uint4 *vm, int ctx, int n, int chunk, int splits, float qscale,
                                                                     float *part_o, float *part_ml) {
  constexpr int T = 16 * WARPS;
  extern __shared__ __align__(16) unsigned char dyn[];
  unsigned (*kst)[T][ROWW] = reinterpret_cast<unsigned (*)[T][ROWW]>(dyn);
  unsigned (*vst)[T][ROWW] = reinterpret_cast<unsigned (*)[T][ROWW]>(dyn + 2 * T * ROWW * 4);
  uint4 (*kms)[T] = reinterpret_cast<uint4 (*)[T]>(dyn + 4 * T * ROWW * 4);
  uint4 (*vms)[T] = reinterpret_cast<uint4 (*)[T]>(dyn + 4 * T * ROWW * 4 + 2 * T * 16);
  __shared__ __half qh[G][D + 8];
  __shared__ float qsum[G][NG];
  float(*sm_o)[G][D] = reinterpret_cast<float (*)[G][D]>(dyn); // after the loop, over the stages
  __shared__ float sm_ml[WARPS][G][2];
  const int kvh = blockIdx.x, split = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int t0 = split * chunk, t1 = min(n, t0 + chunk);
  const size_t base = (size_t)kvh * ctx;
  auto stage = [&](int st, int b) {
    for (int i = threadIdx.x; i < T * 10; i += WARPS * 32) {
      const int row = i / 10, part = i % 10, tok = min(b + row, t1 - 1);
      if (part < 4) cp16(&kst[st][row][4 * part], kc + (base + tok) * 4 + part);
      else if (part < 8) cp16(&vst[st][row][4 * (part - 4)], vc + (base + tok) * 4 + part - 4);
      else if (part == 8) cp16(&kms[st][row], km + base + tok);
      else cp16(&vms[st][row], vm + base + tok);
    }
    cp_commit();
  };
  if (t0 < t1) stage(0, t0);
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) qh[i / D][i % D] = __float2half(q[(kvh * G) * D + i] * qscale);
  __syncthreads();
  for (int i = threadIdx.x; i < G * NG; i += blockDim.x) {
    float s = 0;
    for (int e = 0; e < GS; e++) s += __half2float(qh[i / NG][(i % NG) * GS + e]);
    qsum[i / NG][i % NG] = s;
  }
  unsigned qb[8][2];
#pragma unroll
  for (int kk = 0; kk < 8; kk++) {
#ifdef FASTCVT
    // k slots 2t, 2t+1, 2t+8, 2t+9 are dims t, t+4, 8+t, 12+t of the step:
    // the nibbles one mask takes from a word.
    qb[kk][0] = h2u(__halves2half2(qh[g][16 * kk + t], qh[g][16 * kk + t + 4]));
    qb[kk][1] = h2u(__halves2half2(qh[g][16 * kk + 8 + t], qh[g][16 * kk + 12 + t]));
#else
    qb[kk][0] = h2u(*reinterpret_cast<const __half2 *>(&qh[g][16 * kk + 2 * t]));
    qb[kk][1] = h2u(*reinterpret_cast<const __half2 *>(&qh[g][16 * kk + 2 * t + 8]));
#endif
  }
  __syncthreads();
  float qs[2][NG];
#pragma unroll
  for (int j = 0; j < 2; j++)
#pragma unroll
    for (int gr = 0; gr < NG; gr++) qs[j][gr] = qsum[2 * t + j][gr];

  float m[2] = {NEG, NEG}, l[2] = {0, 0};
  float o[8][4];
#pragma unroll
  for (int i = 0; i < 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0;
  float ob[NG] = {0, 0, 0, 0};

  int st = 0;
  for (int bs = t0; bs < t1; bs += T, st ^= 1) {
    if (bs + T < t1) stage(st ^ 1, bs + T);
    else cp_commit(); // an empty group keeps the count
    cp_wait1();
    __syncthreads();
    const int b = bs + 16 * warp, r0 = 16 * warp;
    if (b < t1) {
      float s[4] = {0, 0, 0, 0};
      const uint4 ma = kms[st][r0 + g], mb = kms[st][r0 + g + 8];
      const unsigned mwa[4] = {ma.x, ma.y, ma.z, ma.w}, mwb[4] = {mb.x, mb.y, mb.z, mb.w};
#pragma unroll
      for (int gr = 0; gr < NG; gr++) {
        const uint4 wa = *reinterpret_cast<const uint4 *>(&kst[st][r0 + g][4 * gr]);
        const uint4 wb = *reinterpret_cast<const uint4 *>(&kst[st][r0 + g + 8][4 * gr]);
        float c[4] = {0, 0, 0, 0};
        const unsigned xa[4] = {wa.x, wa.y, wa.z, wa.w}, xb[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
        for (int h = 0; h < 2; h++) {
          unsigned a[4];
#ifdef FASTCVT
          // 1024 + n as halves, two nibbles by one mask; the 1024s come off
          // through Σq' below.
          const unsigned sh = 4 * t;
          a[0] = ((xa[2 * h] >> sh) & 0x000F000Fu) | 0x64006400u;
          a[1] = ((xb[2 * h] >> sh) & 0x000F000Fu) | 0x64006400u;
          a[2] = ((xa[2 * h + 1] >> sh) & 0x000F000Fu) | 0x64006400u;
          a[3] = ((xb[2 * h + 1] >> sh) & 0x000F000Fu) | 0x64006400u;
#else
          const unsigned sh = 8 * t;
          a[0] = codes2(xa[2 * h] >> sh, xa[2 * h] >> (sh + 4));
          a[1] = codes2(xb[2 * h] >> sh, xb[2 * h] >> (sh + 4));
          a[2] = codes2(xa[2 * h + 1] >> sh, xa[2 * h + 1] >> (sh + 4));
          a[3] = codes2(xb[2 * h + 1] >> sh, xb[2 * h + 1] >> (sh + 4));
#endif
          mma16816(c, a, qb[2 * gr + h][0], qb[2 * gr + h][1]);
        }
        float2 sba = __half22float2(u2h(mwa[gr])), sbb = __half22float2(u2h(mwb[gr]));
#ifdef FASTCVT
        sba.y -= 1024.0f * sba.x;
        sbb.y -= 1024.0f * sbb.x;
#endif
        s[0] += sba.x * c[0] + sba.y * qs[0][gr];
        s[1] += sba.x * c[1] + sba.y * qs[1][gr];
        s[2] += sbb.x * c[2] + sbb.y * qs[0][gr];
        s[3] += sbb.x * c[3] + sbb.y * qs[1][gr];
      }
      if (b + g >= t1) s[0] = s[1] = NEG;
      if (b + g + 8 >= t1) s[2] = s[3] = NEG;
      float alpha[2], p[4];
#pragma unroll
      for (int j = 0; j < 2; j++) {
        float mx = fmaxf(s[j], s[2 + j]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float mn = fmaxf(m[j], mx);
        alpha[j] = exp2f(m[j] - mn);
        p[j] = exp2f(s[j] - mn);
        p[2 + j] = exp2f(s[2 + j] - mn);
        float sum = p[j] + p[2 + j];
        sum += __shfl_xor_sync(0xffffffffu, sum, 4);
        sum += __shfl_xor_sync(0xffffffffu, sum, 8);
        sum += __shfl_xor_sync(0xffffffffu, sum, 16);
        l[j] = l[j] * alpha[j] + sum;
        m[j] = mn;
      }
#pragma unroll
      for (int i = 0; i < 8; i++) {
        o[i][0] *= alpha[0], o[i][1] *= alpha[1], o[i][2] *= alpha[0], o[i][3] *= alpha[1];
      }
      float pt[4];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const int src = (2 * t + i) * 4 + g / 2;
        const float lo0 = __shfl_sync(0xffffffffu, p[0], src), lo1 = __shfl_sync(0xffffffffu, p[1], src);
        const float hi0 = __shfl_sync(0xffffffffu, p[2], src), hi1 = __shfl_sync(0xffffffffu, p[3], src);
        pt[i] = (g & 1) ? lo1 : lo0;
        pt[2 + i] = (g & 1) ? hi1 : hi0;
      }
      const float a0 = __shfl_sync(0xffffffffu, alpha[0], g / 2), a1 = __shfl_sync(0xffffffffu, alpha[1], g / 2);
      const float ag = (g & 1) ? a1 : a0;
      int row[4];
#pragma unroll
      for (int i = 0; i < 4; i++) row[i] = r0 + 2 * t + (i & 1) + 8 * (i >> 1);
      float sv[4][NG];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const uint4 mv = vms[st][row[i]];
        const unsigned w[4] = {mv.x, mv.y, mv.z, mv.w};
#pragma unroll
        for (int gr = 0; gr < NG; gr++) {
          const float2 sb = __half22float2(u2h(w[gr]));
          sv[i][gr] = sb.x;
#ifdef FASTCVT
          // The codes carry +1024 into the product with B = half(s·p): take
          // 1024 of the same rounded value off.
          const float sp = __half2float(__float2half_rn(sb.x * pt[i]));
          ob[gr] = (i == 0 ? ob[gr] * ag : ob[gr]) + sb.y * pt[i] - 1024.0f * sp;
#else
          ob[gr] = (i == 0 ? ob[gr] * ag : ob[gr]) + sb.y * pt[i];
#endif
        }
      }
#pragma unroll
      for (int gr = 0; gr < NG; gr++) {
        const unsigned b0 = h2u(__floats2half2_rn(sv[0][gr] * pt[0], sv[1][gr] * pt[1]));
        const unsigned b1 = h2u(__floats2half2_rn(sv[2][gr] * pt[2], sv[3][gr] * pt[3]));
        uint4 x[4];
#pragma unroll
        for (int i = 0; i < 4; i++) x[i] = *reinterpret_cast<const uint4 *>(&vst[st][row[i]][4 * gr]);
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const unsigned sh = 4 * g;
          const unsigned w0[4] = {h ? x[0].z : x[0].x, h ? x[1].z : x[1].x, h ? x[2].z : x[2].x, h ? x[3].z : x[3].x};
          const unsigned w1[4] = {h ? x[0].w : x[0].y, h ? x[1].w : x[1].y, h ? x[2].w : x[2].y, h ? x[3].w : x[3].y};
          unsigned a[4];
#ifdef FASTCVT
          a[0] = ((w0[0] >> sh) & 15u) | (((w0[1] >> sh) & 15u) << 16) | 0x64006400u;
          a[1] = ((w1[0] >> sh) & 15u) | (((w1[1] >> sh) & 15u) << 16) | 0x64006400u;
          a[2] = ((w0[2] >> sh) & 15u) | (((w0[3] >> sh) & 15u) << 16) | 0x64006400u;
          a[3] = ((w1[2] >> sh) & 15u) | (((w1[3] >> sh) & 15u) << 16) | 0x64006400u;
#else
          a[0] = codes2(w0[0] >> sh, w0[1] >> sh);
          a[1] = codes2(w1[0] >> sh, w1[1] >> sh);
          a[2] = codes2(w0[2] >> sh, w0[3] >> sh);
          a[3] = codes2(w1[2] >> sh, w1[3] >> sh);
#endif
          mma16816(o[2 * gr + h], a, b0, b1);
        }
      }
    }
    __syncthreads(); // the stage is rewritten two iterations on
  }
  asm volatile("cp.async.wait_all;\n" ::);
  __syncthreads();
#pragma unroll
  for (int gr = 0; gr < NG; gr++) {
    ob[gr] += __shfl_xor_sync(0xffffffffu, ob[gr], 1);
    ob[gr] += __shfl_xor_sync(0xffffffffu, ob[gr], 2);
  }
#pragma unroll
  for (int i = 0; i < 8; i++) {
    sm_o[warp][2 * t][16 * i + g] = o[i][0];
    sm_o[warp][2 * t + 1][16 * i + g] = o[i][1];
    sm_o[warp][2 * t][16 * i + g + 8] = o[i][2];
    sm_o[warp][2 * t + 1][16 * i + g + 8] = o[i][3];
  }
  __syncthreads();
  if (t == 0) {
    for (int d = 0; d < D; d++) sm_o[warp][g][d] += ob[d / GS];
  }
  if (g == 0) {
    sm_ml[warp][2 * t][0] = m[0], sm_ml[warp][2 * t][1] = l[0];
    sm_ml[warp][2 * t + 1][0] = m[1], sm_ml[warp][2 * t + 1][1] = l[1];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    const int h = i / D, d = i % D;
    float M = NEG;
    for (int w = 0; w < WARPS; w++) M = fmaxf(M, sm_ml[w][h][0]);
    float acc = 0, L = 0;
    for (int w = 0; w < WARPS; w++) {
      const float wt = exp2f(sm_ml[w][h][0] - M);
      acc += wt * sm_o[w][h][d];
      L += wt * sm_ml[w][h][1];
    }
    const int part = (kvh * G + h) * splits + split;
    part_o[(size_t)part * D + d] = acc;
    if (d == 0) part_ml[2 * part] = M, part_ml[2 * part + 1] = L;
  }
}

static size_t smem_bytes() {
  const size_t T = 16 * WARPS, stages = 4 * T * ROWW * 4 + 4 * T * 16, merge = (size_t)WARPS * G * D * 4;
  return std::max(stages, merge);
}

__global__ void merge(const float *part_o, const float *part_ml, int splits, float *out) {
  const int h = blockIdx.x, d = threadIdx.x;
  const float *ml = part_ml + 2 * h * splits;
  float M = NEG;
  for (int s = 0; s < splits; s++) M = fmaxf(M, ml[2 * s]);
  float L = 0, acc = 0;
  for (int s = 0; s < splits; s++) {
    const float w = exp2f(ml[2 * s] - M);
    L += w * ml[2 * s + 1];
    acc += w * part_o[((size_t)h * splits + s) * D + d];
  }
  out[h * D + d] = acc / L;
}

// The reference: dequantized K and V, float scores, exact softmax.
__global__ void ref_scores(const float *q, const unsigned *kc, const __half2 *km, int ctx, int n, float qscale, float *sc) {
  const int h = blockIdx.y, kvh = h / G;
  for (int tk = blockIdx.x * blockDim.x + threadIdx.x; tk < n; tk += gridDim.x * blockDim.x) {
    const size_t slot = (size_t)kvh * ctx + tk;
    float s = 0;
    for (int e = 0; e < D; e++) {
      const float2 sb = __half22float2(km[slot * NG + e / GS]);
      const float kv = sb.x * float((kc[slot * WORDS + e / 8] >> (4 * (e % 8))) & 15) + sb.y;
      s += __half2float(__float2half(q[h * D + e] * qscale)) * kv;
    }
    sc[(size_t)h * n + tk] = s;
  }
}

__global__ void ref_out(const float *sc, const unsigned *vc, const __half2 *vm, int ctx, int n, float *out) {
  const int h = blockIdx.x, kvh = h / G, d = threadIdx.x;
  float M = NEG;
  for (int tk = 0; tk < n; tk++) M = fmaxf(M, sc[(size_t)h * n + tk]);
  float L = 0, acc = 0;
  for (int tk = 0; tk < n; tk++) {
    const float p = exp2f(sc[(size_t)h * n + tk] - M);
    const size_t slot = (size_t)kvh * ctx + tk;
    const float2 sb = __half22float2(vm[slot * NG + d / GS]);
    acc += p * (sb.x * float((vc[slot * WORDS + d / 8] >> (4 * (d % 8))) & 15) + sb.y);
    L += p;
  }
  out[h * D + d] = acc / L;
}

__global__ void fill(unsigned *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    p[i] = h;
  }
}

__global__ void fill_meta(__half2 *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    const float u = (h & 0xffff) / 65536.0f, v = (h >> 16) / 65536.0f;
    p[i] = __floats2half2_rn(0.02f + 0.2f * u, -1.5f + v); // scale, bias
  }
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 131072;
  const int splits = argc > 2 ? atoi(argv[2]) : 64;
  const int iters = argc > 3 ? atoi(argv[3]) : 50;
  const bool staged = argc > 4 && std::string(argv[4]) == "smem";
  const int ctx = n, chunk = (n + splits - 1) / splits;
  const size_t slots = (size_t)KVH * ctx;
  const size_t codes = slots * D / 2, meta = slots * NG * 4;
  unsigned *kc, *vc;
  __half2 *km, *vm;
  float *q, *po, *pml, *out, *ref, *sc;
  CK(cudaMalloc(&kc, codes));
  CK(cudaMalloc(&vc, codes));
  CK(cudaMalloc(&km, meta));
  CK(cudaMalloc(&vm, meta));
  CK(cudaMalloc(&q, HQ * D * 4));
  CK(cudaMalloc(&po, (size_t)HQ * splits * D * 4));
  CK(cudaMalloc(&pml, (size_t)HQ * splits * 2 * 4));
  CK(cudaMalloc(&out, HQ * D * 4));
  CK(cudaMalloc(&ref, HQ * D * 4));
  CK(cudaMalloc(&sc, (size_t)HQ * n * 4));
  fill<<<1024, 256>>>(kc, codes / 4, 1);
  fill<<<1024, 256>>>(vc, codes / 4, 2);
  fill_meta<<<1024, 256>>>(km, slots * NG, 3);
  fill_meta<<<1024, 256>>>(vm, slots * NG, 4);
  std::vector<float> hq(HQ * D);
  srand(5);
  for (auto &x : hq) x = 2.0f * rand() / RAND_MAX - 1.0f;
  CK(cudaMemcpy(q, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
  const float qscale = 1.0f / sqrtf((float)D) * 1.4426950408889634f;
  const size_t dyn = smem_bytes();
  CK(cudaFuncSetAttribute(attn_q4_mma_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
  auto run = [&]() {
    if (staged)
      attn_q4_mma_smem<<<dim3(KVH, splits), WARPS * 32, dyn>>>(q, (const uint4 *)kc, (const uint4 *)km, (const uint4 *)vc,
                                                               (const uint4 *)vm, ctx, n, chunk, splits, qscale, po, pml);
    else
      attn_q4_mma<<<dim3(KVH, splits), WARPS * 32>>>(q, (const uint4 *)kc, (const uint4 *)km, (const uint4 *)vc, (const uint4 *)vm,
                                                     ctx, n, chunk, splits, qscale, po, pml);
    merge<<<HQ, D>>>(po, pml, splits, out);
  };
  run();
  ref_scores<<<dim3(256, HQ), 256>>>(q, kc, km, ctx, n, qscale, sc);
  ref_out<<<HQ, D>>>(sc, vc, vm, ctx, n, ref);
  CK(cudaDeviceSynchronize());
  std::vector<float> a(HQ * D), r(HQ * D);
  CK(cudaMemcpy(a.data(), out, a.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), ref, r.size() * 4, cudaMemcpyDeviceToHost));
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); i++) {
    err = fmax(err, fabs(a[i] - r[i]));
    scale = fmax(scale, fabs(r[i]));
  }
  printf("attn_mma%s n=%d splits=%d: max |out - ref| = %.3g (largest |ref| %.3g, normalised %.2e)\n", staged ? "[smem]" : "", n, splits, err, scale, err / scale);
  void *flush;
  const size_t fb = 256 << 20;
  CK(cudaMalloc(&flush, fb));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ts;
  for (int i = 0; i < iters; i++) {
    CK(cudaMemsetAsync(flush, i & 255, fb));
    CK(cudaEventRecord(e0));
    run();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms * 1e3f);
  }
  std::sort(ts.begin(), ts.end());
  const double bytes = 2.0 * (codes + meta) + 2.0 * HQ * D * 4;
  printf("attn_mma%s[warps %d, min blocks %d] n=%d splits=%d: median %.1f us, best %.1f us, %.0f GB/s on %.1f MB unique\n", staged ? "[smem]" : "", WARPS, MINB, n, splits, ts[ts.size() / 2], ts[0],
         bytes / (ts[ts.size() / 2] * 1e-6) / 1e9, bytes / 1e6);
  return err / scale < 1e-2 ? 0 : 1;
}
