package metal

import (
	"nibble/engine/backend"
	"nibble/metal/encoder"
)

// What the external tests (package metal_test, which compare the backend
// with the CPU's) reach inside it.

// TensorRegion is where a Metal tensor's bytes are.
func TensorRegion(t backend.Tensor) encoder.Region { return t.(*tensor).Region }

// CacheLayer is layer l of a Metal KV cache.
func CacheLayer(c backend.KVCache, l int) *encoder.KVLayer { return &c.(*kvCache).layers[l] }
