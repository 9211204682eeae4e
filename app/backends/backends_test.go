//go:build !darwin

package backends

import (
	"errors"
	"strings"
	"testing"

	"nibble/metal/mtl"
)

func TestChooseWithoutMetal(t *testing.T) {
	b, c, err := Choose("auto", 1)
	if err != nil || b == nil || b.Name() != "cpu" || c.Backend != "cpu" || c.Reason != "no Metal on this system" {
		t.Fatalf("auto: %v %+v %v", b, c, err)
	}
	b.Close()
	if c.String() != "cpu — no Metal on this system" {
		t.Errorf("choice reads %q", c)
	}
	b, c, err = Choose("cpu", 1)
	if err != nil || b.Name() != "cpu" || c.Backend != "cpu" {
		t.Fatalf("cpu: %+v %v", c, err)
	}
	b.Close()
	_, _, err = Choose("metal", 1)
	if !errors.Is(err, mtl.ErrUnsupported) || !strings.Contains(err.Error(), "Metal backend needs macOS") {
		t.Errorf("metal: %v", err)
	}
	if _, _, err := Choose("gpu", 1); err == nil {
		t.Error("an unknown backend was accepted")
	}
}
