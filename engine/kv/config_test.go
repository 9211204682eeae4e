package kv

import (
	"strings"
	"testing"
)

// Every listed type has a layout, with the sizes the cache format gives:
// f16 2D; q8 D + 4D/gs; q4 D/2 + 4D/gs.
func TestTokenHeadLayout(t *testing.T) {
	want := map[Type]Layout{F16: {Codes: 256}, Q8: {Codes: 128, Meta: 16}, Q4: {Codes: 64, Meta: 16}}
	for _, typ := range Types {
		l, err := TokenHeadLayout(typ, 128, 32)
		if err != nil || l != want[typ] {
			t.Errorf("%s: layout %+v, %v; want %+v", typ, l, err, want[typ])
		}
		if got := BytesPerTokenHead(typ, 128, 32); got != want[typ].Codes+want[typ].Meta {
			t.Errorf("%s: %d bytes per position and head, want %d", typ, got, want[typ].Codes+want[typ].Meta)
		}
	}
}

// A type without a layout is an error, not f16's sizes.
func TestUnknownTypeIsAnError(t *testing.T) {
	unknown := Type(len(Types))
	if _, err := TokenHeadLayout(unknown, 128, 32); err == nil || !strings.Contains(err.Error(), "no storage layout") {
		t.Errorf("layout of %s: err %v, want no storage layout", unknown, err)
	}
	if n := BytesPerTokenHead(unknown, 128, 32); n != 0 {
		t.Errorf("BytesPerTokenHead of %s = %d, want 0", unknown, n)
	}
	cfg := Config{Type: unknown, GroupSize: 32, Layers: 1, KVHeads: 1, HeadDim: 128, Ctx: 16}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "no storage layout") {
		t.Errorf("Validate of a %s cache: err %v, want no storage layout", unknown, err)
	}
	if _, err := New(cfg, func(n int) []byte { return make([]byte, n) }); err == nil {
		t.Errorf("New made a %s cache", unknown)
	}
}
