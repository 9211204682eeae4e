// Package device is the GPU as the Metal backend sees it: a library of
// kernels built from .metal sources, pipelines by kernel name and function
// constants, buffers, and lists of dispatches that run asynchronously until
// Sync. Two implementations: the MSL emulator on Linux (metal/internal/emulator) and
// Metal itself on macOS (the darwin device layer). The encoder writes
// CommandLists against this interface only, so it runs and is tested
// everywhere.
package device

import (
	"fmt"

	"nibble/metal/msl"
)

// Source is one .metal file.
type Source = msl.Source

// Limits of an Apple GPU that both implementations enforce.
const (
	MaxBuffers          = 31    // buffer indices 0..30
	MaxThreads          = 1024  // threads per threadgroup
	MaxThreadgroupBytes = 32768 // threadgroup memory per threadgroup
	MaxInlineBytes      = 4096  // setBytes
	SIMDWidth           = 32
)

// Device is one GPU. Its methods may be called from one goroutine at a time.
type Device interface {
	// Name says which device this is, for diagnostics.
	Name() string
	// NewLibrary compiles sources (in order, as one program) into a library.
	NewLibrary(srcs []Source) (Library, error)
	// NewBuffer allocates a zeroed buffer shared by host and GPU.
	NewBuffer(size int) (Buffer, error)
	// WrapMemory makes a buffer over host memory without copying it (the
	// model's mapping). The memory must stay valid until the buffer is
	// released; Metal also needs it page-aligned.
	WrapMemory(mem []byte) (Buffer, error)
	// Submit validates a list and queues it. The list is copied: the caller
	// may reuse it at once. A malformed list is refused here, as a whole.
	Submit(list *CommandList) error
	// Sync waits until everything submitted has run and returns the first
	// error since the previous Sync. Buffers may be read only after it.
	Sync() error
	// Close syncs and releases the device's buffers and libraries.
	Close() error
}

// Library is a compiled set of sources.
type Library interface {
	// Pipeline makes the compute pipeline of a kernel (by its name or host
	// name) with values for its function constants.
	Pipeline(kernel string, constants ...Constant) (Pipeline, error)
}

// Pipeline is a kernel specialised by its function constants.
type Pipeline interface {
	Name() string
	// MaxThreads is the largest threadgroup it can run.
	MaxThreads() int
}

// Buffer is memory shared by host and GPU.
type Buffer interface {
	Len() int
	// Bytes is the buffer's memory; read it only after Sync.
	Bytes() []byte
	// Release frees the buffer (or lets go of wrapped memory).
	Release()
}

// Constant is the value of the function constant with this index. Value is
// one of bool, int8, uint8, int16, uint16, int32, uint32 or float32, and
// must match the constant's declared type (a float32 also sets a half).
type Constant struct {
	Index int
	Value any
}

// Binding binds buffer(Index) to Buffer from Offset on.
type Binding struct {
	Index  int
	Buffer Buffer
	Offset int
}

// Inline binds buffer(Index) to a copy of Data (setBytes: small constant
// arguments such as a kernel's argument struct).
type Inline struct {
	Index int
	Data  []byte
}

// Dispatch is one kernel launch: Groups threadgroups of Threads threads.
type Dispatch struct {
	Pipeline Pipeline
	Groups   [3]int
	Threads  [3]int
	Buffers  []Binding
	Inline   []Inline
	// Threadgroup[i] is the length of the [[threadgroup(i)]] argument, a
	// multiple of 16.
	Threadgroup []int
}

// CommandList is an ordered list of dispatches; each one sees the results
// of those before it.
type CommandList struct {
	dispatches []Dispatch
}

// Add appends a dispatch. Inline data and the slices of d are copied now,
// so the caller may reuse them.
func (l *CommandList) Add(d Dispatch) {
	d.Buffers = append([]Binding(nil), d.Buffers...)
	d.Threadgroup = append([]int(nil), d.Threadgroup...)
	in := make([]Inline, len(d.Inline))
	for i, b := range d.Inline {
		in[i] = Inline{Index: b.Index, Data: append([]byte(nil), b.Data...)}
	}
	d.Inline = in
	l.dispatches = append(l.dispatches, d)
}

// Len is the number of dispatches.
func (l *CommandList) Len() int { return len(l.dispatches) }

// Dispatches returns the list's dispatches (for a device to run; do not
// modify them).
func (l *CommandList) Dispatches() []Dispatch { return l.dispatches }

// Reset empties the list for reuse.
func (l *CommandList) Reset() { l.dispatches = l.dispatches[:0] }

// Check validates what every device requires of a dispatch, apart from
// which pipeline and buffers it may use: grid and threadgroup sizes within
// limits, bindings within their buffers, threadgroup memory lengths.
func Check(d *Dispatch) error {
	if d.Pipeline == nil {
		return fmt.Errorf("dispatch without a pipeline")
	}
	name := d.Pipeline.Name()
	threads := 1
	for a := 0; a < 3; a++ {
		if d.Groups[a] <= 0 || d.Threads[a] <= 0 || d.Groups[a] > 1<<31-1 {
			return fmt.Errorf("%s: bad grid: %v threadgroups of %v threads", name, d.Groups, d.Threads)
		}
		threads *= d.Threads[a]
	}
	if max := d.Pipeline.MaxThreads(); threads > max {
		return fmt.Errorf("%s: %d threads per threadgroup, more than its %d", name, threads, max)
	}
	var seen uint64 // bit i: index i is bound (MaxBuffers < 64)
	for _, b := range d.Buffers {
		if b.Index < 0 || b.Index >= MaxBuffers || seen>>b.Index&1 != 0 {
			return fmt.Errorf("%s: buffer index %d is outside 0..%d or bound twice", name, b.Index, MaxBuffers-1)
		}
		seen |= 1 << b.Index
		if b.Buffer == nil {
			return fmt.Errorf("%s: buffer(%d) is nil", name, b.Index)
		}
		if b.Offset < 0 || b.Offset >= b.Buffer.Len() || b.Offset%4 != 0 {
			return fmt.Errorf("%s: buffer(%d) offset %d: outside its %d bytes or not a multiple of 4", name, b.Index, b.Offset, b.Buffer.Len())
		}
	}
	for _, b := range d.Inline {
		if b.Index < 0 || b.Index >= MaxBuffers || seen>>b.Index&1 != 0 {
			return fmt.Errorf("%s: inline buffer index %d is outside 0..%d or bound twice", name, b.Index, MaxBuffers-1)
		}
		seen |= 1 << b.Index
		if len(b.Data) == 0 || len(b.Data) > MaxInlineBytes {
			return fmt.Errorf("%s: inline buffer(%d) of %d bytes (1..%d allowed)", name, b.Index, len(b.Data), MaxInlineBytes)
		}
	}
	if len(d.Threadgroup) > MaxBuffers {
		return fmt.Errorf("%s: %d threadgroup arguments, at most %d", name, len(d.Threadgroup), MaxBuffers)
	}
	total := 0
	for i, n := range d.Threadgroup {
		if n < 0 || n%16 != 0 {
			return fmt.Errorf("%s: threadgroup(%d) length %d is not a multiple of 16", name, i, n)
		}
		total += n
	}
	if total > MaxThreadgroupBytes {
		return fmt.Errorf("%s: %d bytes of threadgroup memory, at most %d", name, total, MaxThreadgroupBytes)
	}
	return nil
}

// CheckArgs checks that dispatch d binds every argument kernel k declares:
// each [[buffer(i)]] to a buffer or inline data, and each
// [[threadgroup(i)]] to a memory length.
func CheckArgs(k *msl.Kernel, d *Dispatch) error {
	var bound uint64
	for _, b := range d.Buffers {
		bound |= 1 << b.Index
	}
	for _, b := range d.Inline {
		bound |= 1 << b.Index
	}
	for _, prm := range k.Params {
		switch {
		case prm.Attr == "buffer" && bound>>prm.Index&1 == 0:
			return fmt.Errorf("%s: buffer(%d) (%s) is not bound", k.Name, prm.Index, prm.Name)
		case prm.Attr == "threadgroup" && (prm.Index >= len(d.Threadgroup) || d.Threadgroup[prm.Index] == 0):
			return fmt.Errorf("%s: threadgroup(%d) (%s) has no memory length", k.Name, prm.Index, prm.Name)
		}
	}
	return nil
}

// Cores is implemented by a device that knows how many cores its GPU has
// (an Apple GPU's cores, 7 to 80; an NVIDIA GPU's SMs). The encoder sizes
// grids from it: a mat-vec of a few thousand rows fills an 8-core GPU with
// one simdgroup per couple of rows and leaves most of 132 SMs idle.
type Cores interface {
	Cores() int
}

// DefaultCores is CoreCount of a device that does not say: the smallest
// Apple GPU's (M1's 7 or 8), the grids that suit every Apple GPU.
const DefaultCores = 8

// CoreCount is d's core count when it reports one, DefaultCores otherwise.
func CoreCount(d Device) int {
	if c, ok := d.(Cores); ok {
		if n := c.Cores(); n > 0 {
			return n
		}
	}
	return DefaultCores
}
