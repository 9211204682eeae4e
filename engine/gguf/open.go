package gguf

import (
	"fmt"
	"os"
)

// Open maps the file read-only, parses and validates its header, and
// returns a File whose TensorData views point into the mapping (no copy).
// Call Close when done with the tensors.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: open %s: %w", path, err)
	}
	defer fh.Close() // the mapping outlives the descriptor
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: stat %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: open %s: not a regular file", path)
	}
	data, unmap, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: map %s: %w", path, err)
	}
	f, err := parse(newMappedSource(data), HeaderOptions{})
	if err != nil {
		unmap()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f.mapping, f.unmap = data, unmap
	return f, nil
}
