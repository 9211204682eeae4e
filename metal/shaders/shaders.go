// Package shaders holds the Metal backend's kernels: one .metal file per
// kernel family, kernels named kernel_<op>_<type>. They run on Metal on a
// Mac and in the MSL emulator (metal/emulator) everywhere else; every
// kernel has a test that runs it in the emulator against its Go twin.
package shaders

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"nibble/metal/msl"
)

//go:embed *.metal
var files embed.FS

// Sources returns every kernel source, sorted by file name (the order a
// library is built in).
func Sources() ([]msl.Source, error) {
	names, err := fs.Glob(files, "*.metal")
	if err != nil {
		return nil, fmt.Errorf("shaders: %w", err)
	}
	sort.Strings(names)
	srcs := make([]msl.Source, 0, len(names))
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("shaders: %w", err)
		}
		srcs = append(srcs, msl.Source{Name: n, Text: string(b)})
	}
	return srcs, nil
}
