// Package encoder turns the Metal backend's ops into dispatches: for each op
// it chooses the pipeline (kernel name and function constants), the grid and
// threadgroup sizes, the buffer bindings and offsets and the argument
// struct, and appends the dispatch to a command list. It knows nothing of
// Metal itself: the list runs on any metal/device.Device (Metal on a Mac,
// the MSL emulator elsewhere), so this is tested everywhere.
//
// One file per kernel family (get_rows.go, mul_mv.go, ...), each with the
// argument struct layout its .metal file declares.
package encoder

import (
	"fmt"
	"reflect"

	"nibble/metal/device"
)

// Region is a span of a device buffer: an activation tensor, one weight
// inside the model's mapping, a KV plane, a workspace.
type Region struct {
	Buf device.Buffer
	Off int // bytes from the buffer's start
	Len int // bytes
}

// Sub is the part of r from byte off, n bytes long.
func (r Region) Sub(off, n int) Region { return Region{Buf: r.Buf, Off: r.Off + off, Len: n} }

// bind binds r at buffer(index).
func (r Region) bind(index int) device.Binding {
	return device.Binding{Index: index, Buffer: r.Buf, Offset: r.Off}
}

// pipeKey identifies a cached pipeline: its kernel and up to
// len(consts) function constants, compared as they are given.
type pipeKey struct {
	name   string
	n      int
	consts [8]device.Constant
}

// Encoder appends dispatches to one command list. Like a backend, it is used
// by one goroutine at a time.
type Encoder struct {
	dev   device.Device
	lib   device.Library
	pipes map[pipeKey]device.Pipeline
	list  device.CommandList
	err   error

	// Uploads: host data copied at encode time into staging buffers that
	// live until Reset (after the list has run).
	staging []device.Buffer
	spare   []device.Buffer // staging buffers kept for reuse after Reset
	cur     device.Buffer
	curUsed int

	// Constants: tables that depend only on an op's parameters (rotation
	// signs, RoPE frequencies), uploaded once into buffers of their own
	// that live until Close.
	consts map[string]Region
	key    []byte // scratch for constant keys

	// cores is the GPU's core count (Apple GPU cores, NVIDIA SMs) where the
	// device says (device.Cores), else 0; grids are sized from it.
	cores     int
	mvPerCore int // MatVecSimdgroupsPerCore unless tuned
	// attnKernel: decode attention's pass 1 (SetAttnKernel).
	attnKernel AttnKernel
}

// New returns an encoder for the kernels of lib on dev.
func New(dev device.Device, lib device.Library) *Encoder {
	e := &Encoder{dev: dev, lib: lib, pipes: map[pipeKey]device.Pipeline{}, mvPerCore: MatVecSimdgroupsPerCore}
	if c, ok := dev.(device.Cores); ok {
		e.cores = max(0, c.Cores())
	}
	return e
}

// TuneMatVec sets the simdgroups a core the mat-vec grids aim at
// (MatVecGrid's perCore; MatVecSimdgroupsPerCore by default), to measure
// other grids on one device.
func (e *Encoder) TuneMatVec(perCore int) { e.mvPerCore = max(perCore, 1) }

// Cores is the core count the mat-vec grids are sized for: the device's,
// or device.DefaultCores (the smallest Apple GPU's) where it does not say.
func (e *Encoder) Cores() int {
	if e.cores > 0 {
		return e.cores
	}
	return device.DefaultCores
}

// SetCores sizes the grids for a GPU of n cores (0: unknown), overriding
// what the device said.
func (e *Encoder) SetCores(n int) { e.cores = max(0, n) }

// List is the command list encoded since the last Reset.
func (e *Encoder) List() *device.CommandList { return &e.list }

// Err is the first encoding error since the last Reset: a missing pipeline
// or arguments that break an op's contract (a programming error; ops never
// fail on data).
func (e *Encoder) Err() error { return e.err }

// Reset empties the list and recycles the staging buffers. Call it only
// after the list has run (after the device's Sync).
func (e *Encoder) Reset() {
	e.list.Reset()
	e.err = nil
	e.spare = append(e.spare, e.staging...)
	e.staging = e.staging[:0]
	e.cur, e.curUsed = nil, 0
}

// Close releases the staging buffers.
func (e *Encoder) Close() {
	for _, b := range append(e.staging, e.spare...) {
		b.Release()
	}
	for _, r := range e.consts {
		r.Buf.Release()
	}
	e.staging, e.spare, e.cur, e.consts = nil, nil, nil, nil
}

// Failf records an encoding error (the first one is kept).
func (e *Encoder) Failf(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
}

// pipeline returns the pipeline of a kernel with these function constants,
// made once and cached; nil (and the error recorded) when it cannot be made.
func (e *Encoder) pipeline(name string, consts ...device.Constant) device.Pipeline {
	key := pipeKey{name: name, n: len(consts)}
	cache := copy(key.consts[:], consts) == len(consts)
	for _, c := range consts {
		// A value of an incomparable type is no constant (the library
		// says so); it must not reach the map, whose hash would panic.
		if t := reflect.TypeOf(c.Value); t != nil && !t.Comparable() {
			cache = false
		}
	}
	if !cache {
		return e.makePipeline(name, consts)
	}
	if p, ok := e.pipes[key]; ok {
		return p
	}
	p := e.makePipeline(name, consts)
	if p != nil {
		e.pipes[key] = p
	}
	return p
}

func (e *Encoder) makePipeline(name string, consts []device.Constant) device.Pipeline {
	p, err := e.lib.Pipeline(name, consts...)
	if err != nil {
		e.Failf("pipeline %s: %w", name, err)
		return nil
	}
	return p
}

// dispatch appends one dispatch (nothing when p is nil: its error is
// already recorded). It checks the dispatch as every device will.
func (e *Encoder) dispatch(d device.Dispatch) {
	if d.Pipeline == nil {
		return
	}
	if err := device.Check(&d); err != nil {
		e.Failf("encode: %w", err)
		return
	}
	e.list.Add(d)
}

// stagingSize is the size of one staging buffer; larger uploads get their own.
const stagingSize = 1 << 20

// upload copies data into a staging buffer now and returns its region,
// valid until Reset. Offsets are 16-byte aligned.
func (e *Encoder) upload(data []byte) Region {
	r := e.scratch(len(data))
	if r.Buf != nil {
		copy(r.Buf.Bytes()[r.Off:], data)
	}
	return r
}

// scratch returns n bytes of a staging buffer for the device to write and
// read within the list (their contents are undefined until it does),
// valid until Reset. Offsets are 16-byte aligned.
func (e *Encoder) scratch(length int) Region {
	n := (length + 15) &^ 15
	if n == 0 {
		n = 16
	}
	if e.cur == nil || e.curUsed+n > e.cur.Len() {
		size := stagingSize
		if n > size {
			size = n
		}
		var buf device.Buffer
		for i, s := range e.spare {
			if s.Len() >= size {
				buf = s
				e.spare = append(e.spare[:i], e.spare[i+1:]...)
				break
			}
		}
		if buf == nil {
			var err error
			if buf, err = e.dev.NewBuffer(size); err != nil {
				e.Failf("staging %d bytes: %w", n, err)
				return Region{}
			}
		}
		e.staging = append(e.staging, buf)
		e.cur, e.curUsed = buf, 0
	}
	r := Region{Buf: e.cur, Off: e.curUsed, Len: length}
	e.curUsed += n
	return r
}

// constant returns the region of a table identified by key (which must
// determine its contents), made by fill and uploaded on first use; it lives
// until Close. The zero Region (and the error recorded) when fill or the
// allocation fails.
func (e *Encoder) constant(key []byte, fill func() ([]byte, error)) Region {
	if r, ok := e.consts[string(key)]; ok {
		return r
	}
	data, err := fill()
	if err != nil {
		e.Failf("%w", err)
		return Region{}
	}
	buf, err := e.dev.NewBuffer(max(len(data), 16))
	if err != nil {
		e.Failf("constant of %d bytes: %w", len(data), err)
		return Region{}
	}
	copy(buf.Bytes(), data)
	r := Region{Buf: buf, Len: len(data)}
	if e.consts == nil {
		e.consts = map[string]Region{}
	}
	e.consts[string(key)] = r
	return r
}
