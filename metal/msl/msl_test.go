package msl

import (
	"strings"
	"testing"
)

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		src  string
		want string
	}{
		{"kernel void k(device float * y) {}\n", "e.metal:1: kernel k: parameter"},
		{"\nkernel void k(texture2d<float> t [[texture(0)]]) {}\n", "e.metal:2: kernel k: attribute [[texture(0)]] is not supported"},
		{"kernel void k(device float * y [[buffer(31)]]) {}\n", "e.metal:1: kernel k: buffer(31): the index must be a number in 0..30"},
		{"kernel void k(device float * a [[buffer(1)]],\n device float * b [[buffer(1)]]) {}\n", "e.metal:2: kernel k: buffer(1) is used twice"},
		{"template [[host_name(\"x\")]] kernel void nothing<float>();\n", "e.metal:1: host_name(\"x\"): no kernel template"},
		{"kernel void k(device float * y [[buffer(0)]]) {}\nkernel void k(device float * y [[buffer(0)]]) {}\n", "e.metal:2: kernel k is already defined at e.metal:1"},
		{"constant int a [[function_constant(1)]];\nconstant int b [[function_constant(1)]];\n", "e.metal:2: function constants a and b share index 1"},
		{"constant int a [[function_constant(x)]];\n", "e.metal:1: function_constant(x): the index must be a number"},
		{"kernel void k(device float * y [[buffer(0)]]) {\n  threadgroup float a[4] = {0};\n}\n", "e.metal:2: threadgroup variable a cannot have an initializer"},
		{"kernel void k(device float * y [[buffer(0)]]) { if (is_function_constant_defined(nope)) {} }\n", "e.metal:1: is_function_constant_defined(nope): no function constant nope"},
		{"\n\n/* open", "e.metal:3: unterminated comment"},
		{"kernel void k(device float * y [[buffer(0)]]) {\n", "e.metal:1: unbalanced {"},
		{"[[nonsense]] kernel void k(device float * y [[buffer(0)]]) {}\n", "e.metal:1: unsupported attribute [[nonsense]]"},
	} {
		_, err := Parse([]Source{{Name: "e.metal", Text: c.src}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
	if _, err := Parse([]Source{{Name: "a\"b.metal", Text: ""}}); err == nil {
		t.Error("a source name with a quote was accepted")
	}
}

// Sources share one scope, like one Metal library: a kernel defined in two
// files is an error, a template from one file can be instantiated in the next.
func TestSeveralSources(t *testing.T) {
	a := Source{Name: "a.metal", Text: "template <typename T> kernel void t(device T * y [[buffer(0)]]) {}\n"}
	b := Source{Name: "b.metal", Text: "template [[host_name(\"t_f\")]] kernel void t<float>(device float *);\n"}
	u, err := Parse([]Source{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Kernels) != 1 || u.Kernels[0].File != "b.metal" || u.Kernels[0].Line != 1 {
		t.Errorf("kernels: %+v", u.Kernels)
	}
	c := Source{Name: "c.metal", Text: "kernel void k(device float * y [[buffer(0)]]) {}\n"}
	if _, err := Parse([]Source{c, {Name: "d.metal", Text: c.Text}}); err == nil || !strings.Contains(err.Error(), "d.metal:1: kernel k is already defined at c.metal:1") {
		t.Errorf("a kernel in two files: %v", err)
	}
}

func TestConcat(t *testing.T) {
	got := Concat([]Source{{Name: "a.metal", Text: "x"}, {Name: "b.metal", Text: "y\n"}})
	if want := "#line 1 \"a.metal\"\nx\n#line 1 \"b.metal\"\ny\n"; got != want {
		t.Errorf("Concat = %q, want %q", got, want)
	}
}
