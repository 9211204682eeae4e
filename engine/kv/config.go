// Package kv is Nibble's preallocated key/value cache (docs/ARCHITECTURE.md,
// "KV cache format"): per
// layer, K and V stored separately in [kv_head][position] order as f16, q8
// or q4 (per-group asymmetric, MLX nibble order).
package kv

import (
	"fmt"
	"slices"
	"strings"
)

// Type is the element format of the cache.
type Type uint8

const (
	F16 Type = iota
	Q8
	Q4
)

// Types lists every cache type, in the order reports show them.
var Types = []Type{F16, Q8, Q4}

func (t Type) String() string {
	switch t {
	case F16:
		return "f16"
	case Q8:
		return "q8"
	case Q4:
		return "q4"
	}
	return fmt.Sprintf("kv(%d)", uint8(t))
}

// ParseType accepts f16, q8 (q8_0) and q4 (q4_0, int4).
func ParseType(s string) (Type, error) {
	switch strings.ToLower(s) {
	case "f16":
		return F16, nil
	case "q8", "q8_0", "int8":
		return Q8, nil
	case "q4", "q4_0", "int4":
		return Q4, nil
	}
	return 0, fmt.Errorf("unknown KV cache type %q (want f16, q8 or q4)", s)
}

// DefaultGroupSize is the quantization group along the head dimension.
const DefaultGroupSize = 32

// Config fixes the shape of a cache.
type Config struct {
	Type      Type
	GroupSize int // elements per scale/bias group (q8, q4): 32 or 64
	Layers    int
	KVHeads   int
	HeadDim   int
	Ctx       int  // positions preallocated per layer
	Rotate    bool // store K rotated (see Rotation)
	Smooth    bool // per-channel λ for K, calibrated on the prompt (smooth.go); q8 and q4 only
	// Residual is the f16 residual window (q8, q4): the most recent
	// Residual positions are also kept as f16, and attention reads them
	// from there instead of from their codes (residual.go).
	Residual int
	// Evict bounds the positions the cache holds (evict.go): zero keeps
	// every position of Ctx.
	Evict Eviction
	// LayerWindow, when set, has one entry per layer: a sliding-window
	// layer's window w > 0 makes its planes a ring of min(w, Ctx) slots,
	// position p in slot p mod w (ring.go); 0 keeps every position.
	LayerWindow []int
	// LayerHeadDim and LayerKVHeads, when set, have one entry per layer:
	// that layer's head dim and kv heads (Gemma 4's global layers have
	// wider heads, and in some sizes fewer kv heads, than its local ones).
	// nil: HeadDim and KVHeads for every layer.
	LayerHeadDim []int
	LayerKVHeads []int
}

// HeadDimOf is layer l's head dim.
func (c Config) HeadDimOf(l int) int {
	if l >= 0 && l < len(c.LayerHeadDim) {
		return c.LayerHeadDim[l]
	}
	return c.HeadDim
}

// KVHeadsOf is layer l's kv head count.
func (c Config) KVHeadsOf(l int) int {
	if l >= 0 && l < len(c.LayerKVHeads) {
		return c.LayerKVHeads[l]
	}
	return c.KVHeads
}

// Geometry is the shape of one layer's heads.
type Geometry struct{ KVHeads, HeadDim int }

// Geometries lists the distinct head shapes of the cache's layers, in the
// order of the first layer of each.
func (c Config) Geometries() []Geometry {
	var gs []Geometry
	for l := range max(c.Layers, 1) {
		g := Geometry{c.KVHeadsOf(l), c.HeadDimOf(l)}
		if !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

// MaxHeadDim is the widest head of any layer.
func (c Config) MaxHeadDim() int {
	d := 0
	for _, g := range c.Geometries() {
		d = max(d, g.HeadDim)
	}
	return d
}

// MaxResidual bounds the residual window: a few hundred positions already
// hold nearly all of what it buys, and a bound keeps the ring small.
const MaxResidual = 1024

// DefaultResidual is the residual window a cache of type t gets unless
// told otherwise, chosen on the trained model's needle documents
// (docs/ARCHITECTURE.md, "KV cache format"): 64 positions for q8 and q4,
// none for f16.
func DefaultResidual(t Type) int {
	if t == F16 {
		return 0
	}
	return 64
}

// Window is the residual window the cache keeps: Residual capped at Ctx, 0
// for f16 (whose positions are all f16 already).
func (c Config) Window() int {
	if c.Type == F16 {
		return 0
	}
	return min(c.Residual, c.Slots())
}

// Smooths reports whether a cache of c smooths K channels: Smooth on a
// quantized type (an f16 cache has no groups for an outlier to spoil).
func (c Config) Smooths() bool { return c.Smooth && c.Type != F16 }

// Layout is how one position of one kv head is stored, for K or for V
// alone: its codes, then (q8, q4) a half2 scale and bias per group.
type Layout struct {
	Codes int // bytes of codes: f16 2D, q8 D, q4 D/2
	Meta  int // bytes of metadata: 4D/gs for q8 and q4, none for f16
}

// TokenHeadLayout is the Layout of type t for a head dim of headDim in
// groups of groupSize. It is the one place a type's sizes are written: a
// type missing here is an error (Config.Validate reports it), never f16's
// sizes.
func TokenHeadLayout(t Type, headDim, groupSize int) (Layout, error) {
	switch t {
	case F16:
		return Layout{Codes: 2 * headDim}, nil
	case Q8:
		return Layout{Codes: headDim, Meta: 4 * headDim / groupSize}, nil
	case Q4:
		return Layout{Codes: headDim / 2, Meta: 4 * headDim / groupSize}, nil
	}
	return Layout{}, fmt.Errorf("kv: type %s has no storage layout", t)
}

// BytesPerTokenHead is the storage for one position of one kv head, for K or
// for V alone (TokenHeadLayout's codes and metadata): f16 2D; q8 D + 4D/gs;
// q4 D/2 + 4D/gs. It is 0 for a type without a layout, which Config.Validate
// refuses.
func BytesPerTokenHead(t Type, headDim, groupSize int) int {
	l, err := TokenHeadLayout(t, headDim, groupSize)
	if err != nil {
		return 0
	}
	return l.Codes + l.Meta
}

// Validate reports a config the cache cannot store.
func (c Config) Validate() error {
	switch {
	case c.Layers <= 0 || c.KVHeads <= 0 || c.Ctx <= 0:
		return fmt.Errorf("kv: layers %d, kv heads %d and context %d must be positive", c.Layers, c.KVHeads, c.Ctx)
	case c.LayerHeadDim != nil && len(c.LayerHeadDim) != c.Layers:
		return fmt.Errorf("kv: %d layer head dims for %d layers", len(c.LayerHeadDim), c.Layers)
	case c.LayerKVHeads != nil && len(c.LayerKVHeads) != c.Layers:
		return fmt.Errorf("kv: %d layer kv head counts for %d layers", len(c.LayerKVHeads), c.Layers)
	case len(c.Geometries()) > 1 && c.Evicts():
		return fmt.Errorf("kv: a cache that evicts needs one head shape for every layer")
	case c.Type != F16 && c.GroupSize != 32 && c.GroupSize != 64:
		return fmt.Errorf("kv: group size %d not supported (32 or 64)", c.GroupSize)
	case c.Residual < 0 || c.Residual > MaxResidual:
		return fmt.Errorf("kv: residual window %d outside [0, %d]", c.Residual, MaxResidual)
	}
	for _, g := range c.Geometries() {
		if err := c.validateGeometry(g); err != nil {
			return err
		}
	}
	if err := c.validateRings(); err != nil {
		return err
	}
	return c.Evict.validate(c)
}

func (c Config) validateGeometry(g Geometry) error {
	if _, err := TokenHeadLayout(c.Type, g.HeadDim, max(c.GroupSize, 1)); err != nil {
		return err
	}
	switch {
	case g.KVHeads <= 0:
		return fmt.Errorf("kv: kv heads %d must be positive", g.KVHeads)
	case g.HeadDim <= 0 || g.HeadDim%8 != 0:
		return fmt.Errorf("kv: head dim %d must be a positive multiple of 8", g.HeadDim)
	case c.Rotate && g.HeadDim > MaxRotationDim:
		return fmt.Errorf("kv: rotation of a head dim of %d (at most %d)", g.HeadDim, MaxRotationDim)
	case c.Type != F16 && g.HeadDim%c.GroupSize != 0:
		return fmt.Errorf("kv: head dim %d is not a multiple of group size %d", g.HeadDim, c.GroupSize)
	}
	return nil
}

// Bytes is the exact size of the cache: per layer
// n_kv_head·2·(slots·bytes_per_token_head + window·2·head_dim), slots the
// context (a sliding-window layer's ring: its window), the second term the
// f16 residual window's ring.
func (c Config) Bytes() int64 {
	var n int64
	for l := range c.Layers {
		n += 2 * int64(c.LayerPlaneBytes(l))
	}
	return n + c.evictBytes()
}

// PlaneBytes is the size of one plane (K or V) of a layer without a ring:
// the codes and metadata of every position, then the residual window's f16
// ring.
func (c Config) PlaneBytes() int {
	return c.KVHeads * (c.Slots()*BytesPerTokenHead(c.Type, c.HeadDim, c.GroupSize) + c.Window()*2*c.HeadDim)
}

// LayerPlaneBytes is the size of one plane of layer l: PlaneBytes, or for a
// sliding-window ring its window's slots and residual rows.
func (c Config) LayerPlaneBytes(l int) int {
	d := c.HeadDimOf(l)
	return c.KVHeadsOf(l) * (c.LayerSlots(l)*BytesPerTokenHead(c.Type, d, c.GroupSize) + c.LayerResidual(l)*2*d)
}
