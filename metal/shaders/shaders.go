// Package shaders holds the Metal backend's kernels: one .metal file per
// kernel family, kernels named kernel_<op>_<type>. They run on Metal on a
// Mac and in the MSL emulator (metal/internal/emulator) everywhere else; every
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

// common is the file of shared declarations (the weight formats' blocks
// and their dequantizers): it comes first, the rest in name order.
const common = "common.metal"

// Sources returns every kernel source in the order a library is built in:
// common.metal first, then the rest sorted by file name.
func Sources() ([]msl.Source, error) {
	names, err := fs.Glob(files, "*.metal")
	if err != nil {
		return nil, fmt.Errorf("shaders: %w", err)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == common) != (names[j] == common) {
			return names[i] == common
		}
		return names[i] < names[j]
	})
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
