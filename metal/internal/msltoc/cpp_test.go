package msltoc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nibble/metal/msl"
)

// section returns the translated text of one source (between its #line
// directive and the next).
func section(t *testing.T, code, name string) string {
	t.Helper()
	marker := "#line 1 \"" + name + "\"\n"
	i := strings.Index(code, marker)
	if i < 0 {
		t.Fatalf("no %s in the output", marker)
	}
	rest := code[i+len(marker):]
	if j := strings.Index(rest, "#line 1 \""); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func translate(t *testing.T, srcs ...msl.Source) *Unit {
	t.Helper()
	u, err := Translate(srcs)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRewrites(t *testing.T) {
	src := `#include <metal_stdlib>
using namespace metal;
constant int FC_D [[function_constant(3)]];
constant bool FC_OPT [[function_constant(4)]];
constant int D2 = FC_D*2;
constant float table[2] = {1.0h, 2.0f};
// kernel void commented_out(device float * x [[buffer(0)]]) {}
template <typename T, int N = 4>
kernel void k(
        constant uint & n [[buffer(0)]],
        device const T * x [[buffer(1)]],
        threadgroup float * tg [[threadgroup(2)]],
        uint3 pos [[thread_position_in_grid]],
        ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float a[32], b[4][8];
    threadgroup atomic_int counter;
    threadgroup float * p = a;
    const char * s = "[[buffer(9)]]";
    if (is_function_constant_defined(FC_OPT)) { a[lane] = D2 + 0.5h; }
}
template [[host_name("k_f32")]] kernel void k<float>(constant uint &, device const float *, threadgroup float *, uint3, ushort);
[[max_total_threads_per_threadgroup(64)]]
kernel void plain(device float * y [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) { y[i] = 1; }
`
	u := translate(t, msl.Source{Name: "a.metal", Text: src})
	out := section(t, u.Code, "a.metal")
	got := strings.Split(out, "\n")
	want := strings.Split(src, "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out)
	}
	for _, c := range []struct {
		line     int
		contains []string
	}{
		{3, []string{"static int FC_D;", "static bool __msl_fcdef_FC_D;", `__msl::constant_reg __msl_fcreg_FC_D(3, "FC_D", &FC_D, sizeof(FC_D), &__msl_fcdef_FC_D, "int", "a.metal", 3)`}},
		{5, []string{"static int D2 ;", "__msl::derived_reg", "D2 = ( FC_D*2); });"}},
		{6, []string{"constant float table[2] = {1.0f16, 2.0f};"}},
		{7, []string{"// kernel void commented_out(device float * x [[buffer(0)]]) {}"}},
		{10, []string{`constant uint & n = __msl::buffer<constant uint&>(0, "a.metal", 10),`}},
		{11, []string{`device const T * x = __msl::buffer<device const T*>(1, "a.metal", 11),`}},
		{12, []string{`threadgroup float * tg = __msl::threadgroup_arg<threadgroup float*>(2, "a.metal", 12),`}},
		{13, []string{"uint3 pos = __msl::builtin<uint3>(__msl::thread_position_in_grid),"}},
		{15, []string{`float (&a)[32] = *__msl::threadgroup_local<float [32]>(`, `float (&b)[4][8] = *__msl::threadgroup_local<float [4][8]>(`}},
		{16, []string{"atomic_int &counter = *__msl::threadgroup_local<atomic_int>("}},
		{17, []string{"threadgroup float * p = a;"}},
		{18, []string{`"[[buffer(9)]]"`}},
		{19, []string{"D2 + 0.5f16"}},
		{21, []string{`static __msl::kernel_reg __msl_kreg_`, `("k_f32", +[]{ k<float>(); }, "a.metal", 21, 0);`}},
		{22, []string{""}},
		{23, []string{`("plain", +[]{ plain(); }, "a.metal", 23, 64);`}},
	} {
		line := got[c.line-1]
		for _, s := range c.contains {
			if !strings.Contains(line, s) {
				t.Errorf("line %d: %q\nlacks %q", c.line, line, s)
			}
		}
	}
	if strings.Contains(got[21], "max_total") {
		t.Errorf("line 22 keeps the attribute: %q", got[21])
	}
	if len(u.Kernels) != 2 || u.Kernels[0].Name != "k_f32" || u.Kernels[0].Function != "k" || u.Kernels[0].Args != "float" ||
		u.Kernels[1].Name != "plain" || u.Kernels[1].MaxThreads != 64 || u.Kernels[1].Line != 23 {
		t.Errorf("kernels: %+v", u.Kernels)
	}
	if ps := u.Kernels[0].Params; len(ps) != 5 || ps[2].Attr != "threadgroup" || ps[2].Index != 2 || ps[3].Name != "pos" {
		t.Errorf("params: %+v", ps)
	}
	if cs := u.Kernels[0].Constants; len(cs) != 2 || cs[0] != "FC_OPT" || cs[1] != "FC_D" {
		t.Errorf("constants used by k: %v", cs)
	}
	if cs := u.Constants; len(cs) != 2 || cs[0].Index != 3 || cs[0].Optional || !cs[1].Optional {
		t.Errorf("constants: %+v", cs)
	}
}

// Every line of the real kernels stays where it was.
func TestKeepsLines(t *testing.T) {
	var srcs []msl.Source
	for _, pattern := range []string{"../emulator/testdata/*.metal", "../../shaders/*.metal"} {
		names, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, msl.Source{Name: filepath.Base(n), Text: string(b)})
		}
	}
	if len(srcs) < 4 {
		t.Fatalf("only %d sources found", len(srcs))
	}
	u := translate(t, srcs...)
	for _, s := range srcs {
		out := section(t, u.Code, s.Name)
		if a, b := strings.Count(out, "\n"), strings.Count(s.Text, "\n"); a != b {
			t.Errorf("%s: %d lines, want %d", s.Name, a, b)
		}
	}
}

// Whatever the input, Translate returns an error or keeps every line.
func FuzzTranslate(f *testing.F) {
	for _, pattern := range []string{"../emulator/testdata/*.metal", "../../shaders/*.metal"} {
		names, _ := filepath.Glob(pattern)
		for _, n := range names {
			if b, err := os.ReadFile(n); err == nil {
				f.Add(string(b))
			}
		}
	}
	f.Add("kernel void k(device float * y [[buffer(0)]]) { threadgroup float a[2], b; }")
	f.Fuzz(func(t *testing.T, src string) {
		u, err := Translate([]msl.Source{{Name: "f.metal", Text: src}})
		if err != nil {
			return
		}
		out := section(t, u.Code, "f.metal")
		if a, b := strings.Count(out, "\n"), strings.Count(src, "\n"); a != b && !(a == b+1 && !strings.HasSuffix(src, "\n")) {
			t.Fatalf("%d lines out of %d", a, b)
		}
	})
}
