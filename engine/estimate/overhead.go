package estimate

import (
	"fmt"

	"nibble/engine/backend"
	"nibble/engine/model"
)

// footprint is what the backend called name registered for the estimator
// (backend.RegisterFootprint): its workspace and overhead.
func footprint(name string) (backend.Footprint, error) {
	f, err := backend.FootprintOf(name)
	if err == nil {
		return f, nil
	}
	if name == "metal" {
		// A binary without the metal package (the estimator's own
		// tests, tools that link only the CPU backend) still estimates
		// --backend metal, with the CPU's figures.
		if f, cerr := backend.FootprintOf("cpu"); cerr == nil {
			return metalByCPU{f}, nil
		}
	}
	return nil, fmt.Errorf("estimate: %w", err)
}

// metalByCPU is the CPU's footprint standing in for Metal's: its figures,
// Metal's residual window and Metal's rings for sliding-window layers.
type metalByCPU struct{ backend.Footprint }

// ReadsKVResidual (backend.ResidualReader): Metal reads the residual window.
func (metalByCPU) ReadsKVResidual() bool { return true }

// ReadsKVRing (kv.RingReader): Metal keeps sliding-window layers in rings.
func (metalByCPU) ReadsKVRing() bool { return true }

// shape is what a backend's footprint needs of hp.
func shape(hp model.HParams) backend.Shape {
	return backend.Shape{Embd: hp.Embd, Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, FF: hp.FF, Vocab: hp.Vocab}
}

// BackendOverhead checks the backend name and returns its base overhead
// (the overhead of no model at all).
func BackendOverhead(backend string) (int64, error) {
	f, err := footprint(backend)
	if err != nil {
		return 0, err
	}
	return f.OverheadBytes(shape(model.HParams{}), 0), nil
}

// RuntimeOverhead is the full overhead term for a model and batch on the
// backend called name, as the backend reports it.
func RuntimeOverhead(backend string, hp model.HParams, batch int) (int64, error) {
	f, err := footprint(backend)
	if err != nil {
		return 0, err
	}
	return f.OverheadBytes(shape(hp), batch), nil
}
