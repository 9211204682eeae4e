package estimate

import (
	"fmt"

	"nibble/engine/backend"
	"nibble/engine/model"
)

// footprint is what the backend called name registered for the estimator
// (backend.RegisterFootprint): its workspace and overhead. Only the
// backends linked into the binary are known.
func footprint(name string) (backend.Footprint, error) {
	f, err := backend.FootprintOf(name)
	if err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	return f, nil
}

// shape is what a backend's footprint needs of hp.
func shape(hp model.HParams) backend.Shape {
	return backend.Shape{Embd: hp.Embd, Heads: hp.Heads, KVHeads: hp.MaxKVHeads(), HeadDim: hp.MaxHeadDim(), FF: hp.MaxFF(), Vocab: hp.Vocab}
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
