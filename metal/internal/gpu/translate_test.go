package gpu

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nibble/metal/encoder"
	"nibble/metal/internal/msltoc"
	"nibble/metal/shaders"
)

// TestTranslateShaders translates every shader to CUDA: each kernel gets an
// entry and a registry row, the sources keep their lines, and, where
// clang-19 is installed, the whole unit (with the shim's stand-ins for the
// CUDA keywords) passes a C++ syntax and type check, templates instantiated.
// nvcc itself runs only on the GPU machine (run.sh).
func TestTranslateShaders(t *testing.T) {
	srcs, err := shaders.Sources()
	if err != nil {
		t.Fatal(err)
	}
	c, err := msltoc.TranslateCUDA(srcs)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Unit.Kernels) < 50 {
		t.Fatalf("%d kernels", len(c.Unit.Kernels))
	}
	for _, k := range c.Unit.Kernels {
		bounds := ""
		if k.MaxThreads > 0 {
			bounds = fmt.Sprintf("__launch_bounds__(%d) ", k.MaxThreads)
		}
		for _, want := range []string{`extern "C" __global__ void ` + bounds + k.Name + "(", "msl_launch_" + k.Name + ", "} {
			if !strings.Contains(c.Code, want) {
				t.Errorf("%s: no %q", k.Name, want)
			}
		}
	}
	for _, s := range srcs {
		marker := "#line 1 \"" + s.Name + "\"\n"
		i := strings.Index(c.Code, marker)
		if i < 0 {
			t.Fatalf("no %s", marker)
		}
		rest := c.Code[i+len(marker):]
		if j := strings.Index(rest, "#line 1 \""); j >= 0 {
			rest = rest[:j]
		}
		if s.Name == srcs[len(srcs)-1].Name {
			rest = rest[:strings.Index(rest, "} // namespace msl")]
		}
		if got, want := strings.Count(rest, "\n"), strings.Count(s.Text, "\n"); got != want {
			t.Errorf("%s: %d lines, the source has %d", s.Name, got, want)
		}
	}
	clang, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Skipf("no clang++-19 for the syntax check: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "kernels.cu")
	// The registry's argument sizes (msl::arg_bytes, which the harness
	// checks each trace's inline blocks against): the attention kernels'
	// struct as the encoder writes it, 0 for a pointer.
	args := len(encoder.AttnArgs{}.Bytes())
	code := c.Code + "static_assert(sizeof(msl::entry::args_kernel_attn_decode_mma_q4) == 23*sizeof(int), \"11 buffers\");\n" + fmt.Sprintf("\nstatic_assert(msl::arg_bytes<typename msl::fn_arg<decltype(&msl::kernel_attn_merge_f32), 0>::type>() == %d, \"attn_args\");\n", args) +
		"static_assert(msl::arg_bytes<typename msl::fn_arg<decltype(&msl::kernel_attn_merge_f32), 1>::type>() == 0, \"a pointer\");\n"
	if err := os.WriteFile(file, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(clang, "-std=c++17", "-fsyntax-only", "-DMSL_NO_REGISTRY", "-I", "include", "-x", "c++", file).CombinedOutput()
	if err != nil {
		t.Fatalf("clang: %v\n%s", err, out)
	}
}

// The harness reads the trace format the Go side writes.
func TestTraceFormat(t *testing.T) {
	src, err := os.ReadFile("harness.cu")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("#define TRACE_FORMAT %d\n", traceFormat); !strings.Contains(string(src), want) {
		t.Errorf("harness.cu has no %q", want)
	}
	tr, err := NewTrace(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(tr.dir, "x.trace"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("nibble-trace %d\n", traceFormat); string(b) != want {
		t.Errorf("header %q, want %q", b, want)
	}
}
