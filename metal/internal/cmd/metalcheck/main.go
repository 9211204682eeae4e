//go:build darwin

// Command metalcheck checks the darwin Metal device layer on a Mac: it opens
// the system default GPU, compiles the kernels (metal/shaders), runs
// kernel_add_f32 on a shared buffer and on page-aligned memory wrapped
// without copying (as the model's mapping is), and checks the sums.
//
//	go run ./metal/internal/cmd/metalcheck
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"

	"nibble/metal/device"
	"nibble/metal/mtl"
	"nibble/metal/shaders"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "metalcheck:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}

func run() error {
	dev, err := mtl.Open()
	if err != nil {
		return err
	}
	defer dev.Close()
	m := dev.Memory()
	fmt.Printf("device     %s\n", dev.Name())
	fmt.Printf("residency  %s\n", dev.Residency())
	fmt.Printf("memory     hw.memsize %d MiB, iogpu.wired_limit_mb %d, recommendedMaxWorkingSetSize %d MiB, currentAllocatedSize %d MiB, maxBufferLength %d MiB, unified %v\n",
		m.MemSize>>20, m.WiredLimitMB, m.RecommendedMaxWorkingSet>>20, m.CurrentAllocated>>20, m.MaxBufferLength>>20, m.UnifiedMemory)

	srcs, err := shaders.Sources()
	if err != nil {
		return err
	}
	lib, err := dev.Build(srcs)
	if err != nil {
		return err
	}
	fmt.Printf("library    %d kernels compiled in %v\n", len(lib.Kernels()), lib.CompileTime.Round(time.Millisecond))
	p, err := lib.Pipeline("kernel_add_f32")
	if err != nil {
		return err
	}
	fmt.Printf("pipeline   %s, up to %d threads per threadgroup\n", p.Name(), p.MaxThreads())

	const n = 1<<20 + 3
	dst, err := dev.NewBuffer(4 * n)
	if err != nil {
		return err
	}
	// x lives in an anonymous mapping, page-aligned like a file mapping,
	// and is wrapped with newBufferWithBytesNoCopy.
	mem, err := syscall.Mmap(-1, 0, 4*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer syscall.Munmap(mem)
	x, err := dev.WrapMemory(mem)
	if err != nil {
		return err
	}
	d := dst.Bytes()
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(float32(i)))
		binary.LittleEndian.PutUint32(mem[4*i:], math.Float32bits(0.5*float32(i%1000)))
	}
	var list device.CommandList
	args := binary.LittleEndian.AppendUint32(nil, n)
	tg := min(256, p.MaxThreads())
	// A second dispatch binds both buffers at byte 256, which checks the
	// offsets: elements 64..127 are added twice.
	list.Add(device.Dispatch{Pipeline: p, Groups: [3]int{(n + tg - 1) / tg, 1, 1}, Threads: [3]int{tg, 1, 1},
		Inline: []device.Inline{{Index: 0, Data: args}}, Buffers: []device.Binding{{Index: 1, Buffer: dst}, {Index: 2, Buffer: x}}})
	list.Add(device.Dispatch{Pipeline: p, Groups: [3]int{1, 1, 1}, Threads: [3]int{64, 1, 1},
		Inline: []device.Inline{{Index: 0, Data: binary.LittleEndian.AppendUint32(nil, 64)}}, Buffers: []device.Binding{{Index: 1, Buffer: dst, Offset: 256}, {Index: 2, Buffer: x, Offset: 256}}})
	t0 := time.Now()
	if err := dev.Submit(&list); err != nil {
		return err
	}
	if err := dev.Sync(); err != nil {
		return err
	}
	fmt.Printf("dispatch   %d elements in %v (GPU %v)\n", n, time.Since(t0).Round(time.Microsecond), dev.GPUTime().Round(time.Microsecond))
	bad := 0
	for i := 0; i < n; i++ {
		want := float32(i) + 0.5*float32(i%1000)
		if i >= 64 && i < 128 {
			want += 0.5 * float32(i%1000)
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:])); got != want {
			if bad < 5 {
				fmt.Printf("  dst[%d] = %g, want %g\n", i, got, want)
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("kernel_add_f32: %d of %d elements wrong", bad, n)
	}
	x.Release()
	dst.Release()
	fmt.Printf("after      currentAllocatedSize %d MiB, resident %d MiB\n", dev.Memory().CurrentAllocated>>20, dev.ResidentBytes()>>20)
	return nil
}
