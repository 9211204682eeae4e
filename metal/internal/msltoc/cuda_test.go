package msltoc

import (
	"strings"
	"testing"

	"nibble/metal/msl"
)

func TestCUDARewrites(t *testing.T) {
	src := `#include <metal_stdlib>
using namespace metal;
constant int FC_D [[function_constant(3)]];
constant bool FC_OPT [[function_constant(4)]];
constant int D2 = FC_D*2;
constant float table[2] = {1.0h, 2.0f};
constant constexpr short TILE = 64;
struct S {
    float v;
    static inline float one() { return 1.0f; }
    template <typename T> T twice(T x) const { return x*2; }
};
inline float2 lo(float4 v) { return v.xy + v.zw; }
// kernel void commented_out(device float * x [[buffer(0)]]) {}
template <typename T, int N = 4>
kernel void k(
        constant uint & n [[buffer(0)]],
        device const T * x [[buffer(1)]],
        threadgroup float * tg [[threadgroup(2)]],
        uint3 pos [[thread_position_in_grid]],
        ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float a[32], b[4][8];
    threadgroup float * p = a;
    const char * s = "[[buffer(9)]] device";
    if (is_function_constant_defined(FC_OPT)) { a[lane] = D2 + 0.5h; }
}
template [[host_name("k_f32")]] kernel void k<float>(constant uint &, device const float *, threadgroup float *, uint3, ushort);
[[max_total_threads_per_threadgroup(64)]]
kernel void plain(device float * y [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) { y[i] = 1; }
`
	c, err := TranslateCUDA([]msl.Source{{Name: "a.metal", Text: src}})
	if err != nil {
		t.Fatal(err)
	}
	out := section(t, c.Code, "a.metal")
	out = out[:strings.Index(out, "} // namespace msl")]
	if got, want := strings.Count(out, "\n"), strings.Count(src, "\n"); got != want {
		t.Errorf("%d lines, the source has %d:\n%s", got, want, out)
	}
	lines := strings.Split(out, "\n")
	for _, w := range []struct {
		line int // 1-based
		want string
	}{
		{3, ""}, // the function constants move to the prelude
		{5, "static __device__ __forceinline__ int __msl_dc_D2() { return ( FC_D*2); }"},
		{6, "static __device__ const float table[2] = {half(1.0f), 2.0f};"},
		{7, " constexpr short TILE = 64;"},
		{10, "    __device__ static inline float one() { return 1.0f; }"},
		{11, "    template <typename T> __device__ T twice(T x) const { return x*2; }"},
		{13, "__device__ inline float2 lo(float4 v) { return v.xy() + v.zw(); }"},
		{14, "// kernel void commented_out(device float * x [[buffer(0)]]) {}"},
		{16, "__device__ __forceinline__ void k("},
		{17, "         uint & n ,"},
		{18, "         const T * x ,"},
		{19, "         float * tg ,"},
		{20, "        uint3 pos ,"},
		{22, "    __shared__ float a[32], b[4][8];"},
		{23, "     float * p = a;"},
		{24, `    const char * s = "[[buffer(9)]] device";`},
		{25, "    if (__msl_fcdef_FC_OPT) { a[lane] = __msl_dc_D2() + half(0.5f); }"},
		{27, ""},
		{29, "__device__ __forceinline__ void plain( float * y , uint i ) { y[i] = 1; }"},
	} {
		if got := strings.TrimRight(lines[w.line-1], " "); got != strings.TrimRight(w.want, " ") {
			t.Errorf("line %d:\n got %q\nwant %q", w.line, got, w.want)
		}
	}
	for _, want := range []string{
		"#if defined(MSL_FC_3)\nstatic constexpr int FC_D = (int)(MSL_FC_3); static constexpr bool __msl_fcdef_FC_D = true;\n#else\n__constant__ int FC_D; __constant__ bool __msl_fcdef_FC_D;\n#endif\n",
		`extern "C" __global__ void k_f32(void *b0, void *b1, unsigned tg2) {`,
		"msl::k<float>(msl::bind_arg<typename msl::fn_arg<decltype(&msl::k<float>), 0>::type>(b0), ",
		"(typename msl::fn_arg<decltype(&msl::k<float>), 2>::type)(msl_shared + tg2), ",
		"msl::builtin_arg<typename msl::fn_arg<decltype(&msl::k<float>), 4>::type>(msl::thread_index_in_simdgroup())",
		`extern "C" __global__ void __launch_bounds__(64) plain(void *b0) {`,
		`{"k_f32", 0, "0,1", "2", (const void *) msl::entry::k_f32, msl_launch_k_f32, "a.metal:27", msl::entry::args_k_f32},`,
		"static const int args_k_f32[] = {0, msl::arg_bytes<typename msl::fn_arg<decltype(&msl::k<float>), 0>::type>(), " +
			"1, msl::arg_bytes<typename msl::fn_arg<decltype(&msl::k<float>), 1>::type>(), -1};",
		"    msl::entry::plain<<<g, t, shared, s>>>(b[0]);",
		`{3, "FC_D", "int", msl_fcset_3},`,
	} {
		if !strings.Contains(c.Code, want) {
			t.Errorf("no %q in the output", want)
		}
	}
	if len(c.Unit.Kernels) != 2 {
		t.Errorf("%d kernels", len(c.Unit.Kernels))
	}
}

func TestCUDAErrors(t *testing.T) {
	// Translate's errors carry over, at the .metal line.
	_, err := TranslateCUDA([]msl.Source{{Name: "e.metal", Text: "kernel void f(device float * x) {}\n"}})
	if err == nil || !strings.Contains(err.Error(), "e.metal:1:") {
		t.Errorf("error %v", err)
	}
}
