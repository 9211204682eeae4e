package gpu

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	if err := os.WriteFile(file, []byte(c.Code), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(clang, "-std=c++17", "-fsyntax-only", "-DMSL_NO_REGISTRY", "-I", "include", "-x", "c++", file).CombinedOutput()
	if err != nil {
		t.Fatalf("clang: %v\n%s", err, out)
	}
}
