//go:build linux

package encoder

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"nibble/engine/backend"
	"nibble/engine/kv"
	"nibble/metal/internal/emulator"
)

// KVStoreRoPE against RoPE then KVStore on the emulator, in both orders:
// the planes byte for byte (the same angles, cos, sin and products, then
// the same store), for every cache type with smoothing, rotation and a
// residual window, one row (decode) and batches at positions up to 4096,
// RoPE on every pair or on the first 48 dims, with an attention factor and
// frequency factors. NeoX goes through RoPE and KVStore, so k is rotated in
// place; with norm RoPE k is left as given.
func TestKVStoreRoPE(t *testing.T) {
	dev, e := emuEncoder(t)
	r := rand.New(rand.NewPCG(81, 82))
	for i, cfg := range []kv.Config{
		{Type: kv.Q4, GroupSize: 32, KVHeads: 2, HeadDim: 64, Smooth: true, Rotate: true, Residual: 16},
		{Type: kv.Q8, GroupSize: 64, KVHeads: 3, HeadDim: 128},
		{Type: kv.F16, KVHeads: 8, HeadDim: 64},
		{Type: kv.Q4, GroupSize: 32, KVHeads: 1, HeadDim: 512},
	} {
		cfg.Layers, cfg.Ctx = 1, 4200
		rope := &backend.RoPE{Dims: cfg.HeadDim, Base: 500000, PosScale: 1}
		switch i {
		case 1:
			rope.Dims, rope.AttnFactor = 48, 1.25
		case 2:
			rope.FreqFactors = make([]float32, rope.Dims/2)
			for j := range rope.FreqFactors {
				rope.FreqFactors[j] = 1 + float32(j%5)
			}
		case 3:
			rope.Neox = true
		}
		w := cfg.KVHeads * cfg.HeadDim
		for _, o := range []emulator.Order{emulator.Forward, emulator.Reverse} {
			for _, at := range [][2]int{{4095, 1}, {17, 9}, {0, 40}} {
				pos, rows := at[0], at[1]
				t.Run(fmt.Sprintf("%v_d%d_dims%d_neox%v_pos%d_rows%d_%v", cfg.Type, cfg.HeadDim, rope.Dims, rope.Neox, pos, rows, o), func(t *testing.T) {
					plain, fused := opsLayer(t, dev, cfg), opsLayer(t, dev, cfg)
					if cfg.Smooths() {
						l := opsLambda(r, w)
						e.KVSetSmoothing(plain, l)
						e.KVSetSmoothing(fused, l)
					}
					k, v := randomFloats(r, rows*w, 2), randomFloats(r, rows*w, 1)
					positions := make([]int32, rows)
					for j := range positions {
						positions[j] = int32(pos + j)
					}
					kp, vp := devFloats(t, dev, k, 0), devFloats(t, dev, v, 0)
					e.RoPE(kp, cfg.KVHeads, cfg.HeadDim, rows, positions, rope)
					e.KVStore(plain, kp, vp, pos, rows)
					kf := devFloats(t, dev, k, 0)
					n0 := e.List().Len()
					e.KVStoreRoPE(fused, kf, devFloats(t, dev, v, 0), pos, rows, rope)
					want := 1
					if rope.Neox {
						want = 2
					}
					if n := e.List().Len() - n0; n != want {
						e.Reset()
						t.Fatalf("%d dispatches, want %d", n, want)
					}
					runEncoded(t, dev, e, o)
					if !bytes.Equal(plain.K.Buf.Bytes(), fused.K.Buf.Bytes()) || !bytes.Equal(plain.V.Buf.Bytes(), fused.V.Buf.Bytes()) {
						t.Fatalf("the planes differ")
					}
					if rotated := !bytes.Equal(kf.Buf.Bytes()[kf.Off:kf.Off+kf.Len], f32Bytes(k)); rotated != rope.Neox {
						t.Fatalf("k rotated in place: %v", rotated)
					}
				})
			}
		}
	}
}
