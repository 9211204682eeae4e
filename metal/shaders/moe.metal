// The mixture-of-experts ops besides the matmuls (mul_mv.metal's and
// mul_mm.metal's _id kernels), as engine/backend.Experts defines them. A
// token's k chosen experts are its k slots, s = row·k + j; expert ids are
// floats (exact below 2^24), as kernel_argmax writes them, so the router's
// choice stays on the GPU.
//
//   kernel_moe_route_f32:          the top k of each row of router logits, and
//                                  their weights (softmax, softmax over the
//                                  k, or sigmoid; optional renormalisation,
//                                  its sum at least 2^-14, and scale)
//   kernel_add_bias_id_f32[_4]:    x[s] += b[ids[s]]
//   kernel_sum_experts_f32[_4]:    dst[row] = Σ_j weights[row·k + j]·y[row·k + j]
//   kernel_swiglu_clamped_f32[_4]: gpt-oss's clamped SwiGLU
#include <metal_stdlib>
using namespace metal;

// The gatings (backend.Gating's values).
#define MOE_SOFTMAX      0 // softmax over every expert's logit, then the top k
#define MOE_SOFTMAX_TOPK 1 // the top k logits, then a softmax over those k
#define MOE_SIGMOID      2 // sigmoid of each logit, then the top k

#define MOE_MAX_K 32
#define MOE_LOG2E 1.4426950408889634f

struct moe_route_args {
    uint  experts; // logits per row, at most 32·32
    uint  k;       // experts chosen per row, 1..MOE_MAX_K, at most experts
    uint  gating;  // MOE_SOFTMAX, MOE_SOFTMAX_TOPK or MOE_SIGMOID
    uint  norm;    // 1: divide the k weights by their sum
    float scale;   // multiplies the final weights
};

// moe_exp is e^x through the CPU's 2^x (engine/fastmath.Exp2, ew_exp2).
inline float moe_exp(float x) { return ew_exp2<float, int, uint>(x*MOE_LOG2E); }

// kernel_moe_route_f32: one simdgroup per row of logits. Lane l holds the
// experts l, l + 32, ... (bit i of `taken` for expert l + 32·i). Each of
// the k rounds takes the largest logit not yet taken, the lower id on ties
// (a NaN logit is never taken while a number is left), as backend.Router
// orders them. Sums run in lane order then simd_sum's.
//
// Grid: (rows), 32 threads.
kernel void kernel_moe_route_f32(
        constant moe_route_args & args    [[buffer(0)]],
        device const float      * logits  [[buffer(1)]],
        device       float      * ids     [[buffer(2)]],
        device       float      * weights [[buffer(3)]],
        uint   row  [[threadgroup_position_in_grid]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint none = 0xffffffffu;
    device const float * x = logits + (ulong) row*args.experts;

    // The largest logit, for the softmax over every expert (a NaN is none).
    float m = -INFINITY;
    for (uint i = lane; i < args.experts; i += 32) {
        const float v = x[i];
        m = v > m ? v : m;
    }
    m = simd_max(m);

    uint  taken = 0;
    float mine  = 0.0f; // lane j < k: the logit of the j-th choice
    uint  myid  = 0;
    for (uint j = 0; j < args.k; j++) {
        float bv = -INFINITY;
        uint  bi = none;
        for (uint i = lane, b = 0; i < args.experts; i += 32, b++) {
            const float v = x[i];
            // Scanning upwards, strictly greater keeps the lower id; the
            // first untaken expert stands in while only -Inf or NaN were seen.
            if (!((taken >> b) & 1) && (v > bv || bi == none)) {
                bv = isnan(v) ? -INFINITY : v;
                bi = i;
            }
        }
        const float mv = simd_max(bv);
        const uint  mi = simd_min(bv == mv ? bi : none);
        if (mi % 32 == lane && mi != none) {
            taken |= 1u << (mi/32);
        }
        if (lane == j) {
            mine = mv;
            myid = mi;
        }
    }

    // Each lane j < k makes its weight.
    const bool chosen = lane < args.k;
    float w = 0.0f;
    if (args.gating == MOE_SIGMOID) {
        w = 1.0f/(1.0f + moe_exp(-mine));
    } else if (args.gating == MOE_SOFTMAX_TOPK) {
        const float m0 = simd_broadcast(mine, 0); // the first choice: the largest
        w = moe_exp(mine - m0);
    } else {
        w = moe_exp(mine - m);
    }
    w = chosen ? w : 0.0f;
    float denom = 1.0f;
    if (args.gating == MOE_SOFTMAX_TOPK) {
        denom = simd_sum(w);
    } else if (args.gating == MOE_SOFTMAX) {
        float s = 0.0f;
        for (uint i = lane; i < args.experts; i += 32) {
            s += moe_exp(x[i] - m);
        }
        denom = simd_sum(s);
    }
    w = w/denom;
    if (args.norm != 0) {
        // The sum is clamped to fp16's smallest normal, as llama.cpp does.
        w = w/max(simd_sum(w), 6.103515625e-5f);
    }
    w = w*args.scale;
    if (chosen) {
        ids[(ulong) row*args.k + lane]     = float(myid);
        weights[(ulong) row*args.k + lane] = w;
    }
}

// kernel_add_bias_id: x[s·n + i] += b[ids[s]·n + i] (grid y: the slot);
// an id outside [0, experts) is read as the last expert.
struct moe_bias_id_args {
    uint n;       // elements (floats or float4s) per row
    uint experts; // rows of b
};

template <typename T>
kernel void kernel_add_bias_id(
        constant moe_bias_id_args & args [[buffer(0)]],
        device       T            * x    [[buffer(1)]],
        device const T            * b    [[buffer(2)]],
        device const float        * ids  [[buffer(3)]],
        uint2 gid [[thread_position_in_grid]]) {
    if (gid.x < args.n) {
        const uint e = uint(clamp(ids[gid.y], 0.0f, float(args.experts - 1)));
        x[(ulong) gid.y*args.n + gid.x] += b[(ulong) e*args.n + gid.x];
    }
}

typedef decltype(kernel_add_bias_id<float>) add_bias_id_t;

template [[host_name("kernel_add_bias_id_f32")]]   kernel add_bias_id_t kernel_add_bias_id<float>;
template [[host_name("kernel_add_bias_id_f32_4")]] kernel add_bias_id_t kernel_add_bias_id<float4>;

// kernel_sum_experts: dst[r·n + i] = Σ_j w[r·k + j]·y[(r·k + j)·n + i], j
// in order from 0 (grid y: the row).
struct moe_sum_args {
    uint n; // elements (floats or float4s) per row
    uint k; // slots per row
};

template <typename T>
kernel void kernel_sum_experts(
        constant moe_sum_args & args [[buffer(0)]],
        device       T        * dst  [[buffer(1)]],
        device const T        * y    [[buffer(2)]],
        device const float    * w    [[buffer(3)]],
        uint2 gid [[thread_position_in_grid]]) {
    if (gid.x >= args.n) {
        return;
    }
    const ulong s0 = (ulong) gid.y*args.k;
    T acc = w[s0]*y[s0*args.n + gid.x];
    for (uint j = 1; j < args.k; j++) {
        acc += w[s0 + j]*y[(s0 + j)*args.n + gid.x];
    }
    dst[(ulong) gid.y*args.n + gid.x] = acc;
}

typedef decltype(kernel_sum_experts<float>) sum_experts_t;

template [[host_name("kernel_sum_experts_f32")]]   kernel sum_experts_t kernel_sum_experts<float>;
template [[host_name("kernel_sum_experts_f32_4")]] kernel sum_experts_t kernel_sum_experts<float4>;

// kernel_swiglu_clamped: gpt-oss's gate (the gpt-oss model card; ggml's
// swiglu_oai): g = min(gate, limit), u = clamp(up, -limit, limit),
// dst = g/(1 + e^(-alpha·g))·(u + 1), e^x through the CPU's 2^x.
struct moe_swiglu_args {
    uint  n;     // elements (floats or float4s)
    float alpha;
    float limit;
};

inline float  moe_sigmoid_den(float  x) { return 1.0f + ew_exp2<float,  int,  uint >(-x*MOE_LOG2E); }
inline float4 moe_sigmoid_den(float4 x) { return 1.0f + ew_exp2<float4, int4, uint4>(-x*MOE_LOG2E); }

template <typename T>
kernel void kernel_swiglu_clamped(
        constant moe_swiglu_args & args [[buffer(0)]],
        device       T           * dst  [[buffer(1)]],
        device const T           * gate [[buffer(2)]],
        device const T           * up   [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        const T g = min(gate[i], T(args.limit));
        const T u = clamp(up[i], T(-args.limit), T(args.limit));
        dst[i] = g/moe_sigmoid_den(args.alpha*g)*(u + 1.0f);
    }
}

typedef decltype(kernel_swiglu_clamped<float>) swiglu_clamped_t;

template [[host_name("kernel_swiglu_clamped_f32")]]   kernel swiglu_clamped_t kernel_swiglu_clamped<float>;
template [[host_name("kernel_swiglu_clamped_f32_4")]] kernel swiglu_clamped_t kernel_swiglu_clamped<float4>;
