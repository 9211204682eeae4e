package family

import (
	"slices"
	"testing"
)

// The built-in families keep their order: synth and the CLI list them so.
func TestBuiltinOrder(t *testing.T) {
	want := []string{"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}
	if got := Names(); !slices.Equal(got[:len(want)], want) {
		t.Errorf("families %v, want %v first", got, want)
	}
	if f, ok := Lookup("gemma2"); !ok || f.Traits.AttnSoftcap != 50 || !f.Quirks.TiedOutput {
		t.Errorf("gemma2: %+v, %v", f, ok)
	}
	if _, ok := Lookup("mistral"); ok {
		t.Error("mistral is not an architecture: its files say llama")
	}
}

// A name registered twice, or not in lower case, is refused.
func TestRegisterRefuses(t *testing.T) {
	for _, name := range []string{"llama", "", "Llama"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			Register(Family{Name: name})
		}()
	}
}

func TestList(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := List(c.in); got != c.want {
			t.Errorf("List(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
