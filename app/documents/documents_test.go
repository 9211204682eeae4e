package documents

import (
	"fmt"
	"testing"
	"unicode/utf8"
)

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{512: "512 bytes", 1536: "1.5 KiB", 64 << 20: "64 MiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestNewDocument(t *testing.T) {
	d := NewDocument("x", KindText, "ok \xff")
	if !utf8.ValidString(d.Text) || len(d.Warnings) != 1 {
		t.Errorf("%q %q", d.Text, d.Warnings)
	}
	_ = fmt.Sprint(d.Lines())
}
