// Package metal is the Metal backend: engine/backend.Backend over a
// metal/device.Device. Every op is encoded into a command list by
// metal/encoder (pipeline, grid, bindings, argument struct) and the list runs
// at Sync. The device is Metal on a Mac (the darwin device layer) and the MSL
// emulator (metal/internal/emulator) elsewhere, where the whole forward pass is tested
// against the CPU backend.
package metal

import (
	"encoding/binary"
	"fmt"
	"math"

	"nibble/engine/backend"
	"nibble/engine/ggml"
	"nibble/metal/device"
	"nibble/metal/encoder"
	"nibble/metal/shaders"
)

// Backend implements backend.Backend on a device. Like every backend it is
// used by one goroutine at a time.
type Backend struct {
	dev       device.Device
	enc       *encoder.Encoder
	allocated int64
	// live is every buffer the backend made or wrapped and has not released,
	// with the bytes it counts in allocated (0 for a wrapped region): Close
	// releases them.
	live map[device.Buffer]int
	// dead are buffers given back (Free, a cache's or mapping's Close) while
	// encoded work may still use them: the device reads a buffer until the
	// list that binds it has run, so they are released after the next Sync.
	dead   []device.Buffer
	closed bool
}

var _ backend.Backend = (*Backend)(nil)

// New builds the kernels (shaders.Sources) on dev and returns a backend
// running on it. The caller keeps dev: it closes it after the backend.
func New(dev device.Device) (*Backend, error) {
	srcs, err := shaders.Sources()
	if err != nil {
		return nil, err
	}
	lib, err := dev.NewLibrary(srcs)
	if err != nil {
		return nil, fmt.Errorf("metal: building the kernels: %w", err)
	}
	return &Backend{dev: dev, enc: encoder.New(dev, lib), live: map[device.Buffer]int{}}, nil
}

// Name is the backend's name, under which its Footprint is registered.
func (b *Backend) Name() string { return "metal" }

// RotatesHeadDim (backend.KVRotator): the kernels rotate K and queries
// with kv.Rotation's transform for every head dim it takes (multiples of 8)
// whose butterflies and block mixing fit one simdgroup, 32 lanes of 8
// elements: up to 256.
func (b *Backend) RotatesHeadDim(d int) bool { return encoder.RotatesHeadDim(d) }

// Device is the device the backend runs on.
func (b *Backend) Device() device.Device { return b.dev }

// tensor is an activation buffer: n float32s in a buffer of its own.
type tensor struct {
	encoder.Region
	n     int
	freed bool
}

// newBuffer allocates a zeroed device buffer of n bytes, counted.
func (b *Backend) newBuffer(n int) (device.Buffer, error) {
	if b.closed {
		return nil, fmt.Errorf("metal: the backend is closed")
	}
	buf, err := b.dev.NewBuffer(n)
	if err != nil {
		return nil, err
	}
	b.live[buf] = n
	b.allocated += int64(n)
	return buf, nil
}

// release gives back a buffer of live (uncounting its bytes), at once when
// nothing encoded may use it, else after the next Sync.
func (b *Backend) release(buf device.Buffer) {
	if buf == nil {
		return
	}
	n, ok := b.live[buf]
	if !ok {
		return
	}
	delete(b.live, buf)
	b.allocated -= int64(n)
	if b.enc.List().Len() == 0 {
		buf.Release()
		return
	}
	b.dead = append(b.dead, buf)
}

// Alloc returns a zeroed tensor of n floats. A failed allocation (the
// device is out of memory) gives a tensor without a buffer: the ops that
// use it report the failure at Sync.
func (b *Backend) Alloc(n int) backend.Tensor {
	t := &tensor{n: n}
	if n <= 0 {
		return t
	}
	buf, err := b.newBuffer(4 * n)
	if err != nil {
		b.enc.Failf("alloc %d floats: %w", n, err)
		return t
	}
	t.Region = encoder.Region{Buf: buf, Len: 4 * n}
	return t
}

func (b *Backend) AllocatedBytes() int64 { return b.allocated }

// Free gives a tensor back; freeing twice is harmless.
func (b *Backend) Free(t backend.Tensor) {
	x, ok := t.(*tensor)
	if !ok || x.freed {
		return
	}
	x.freed = true
	b.release(x.Buf)
}

// region is the device span of a tensor of this backend, checked to hold n
// floats from float offset off (an op's contract; reported at Sync).
func (b *Backend) region(op string, t backend.Tensor, off, n int) encoder.Region {
	x, ok := t.(*tensor)
	switch {
	case !ok:
		b.enc.Failf("%s: a tensor of type %T, not of the metal backend", op, t)
		return encoder.Region{}
	case x.freed:
		b.enc.Failf("%s: a tensor used after Free", op)
		return encoder.Region{}
	case off < 0 || n < 0 || off+n > x.n:
		b.enc.Failf("%s: floats [%d, %d) of a tensor of %d", op, off, off+n, x.n)
		return encoder.Region{}
	}
	return x.Region
}

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight, tokens []int32) {
	w := b.weight("embed", table)
	if w == nil {
		return
	}
	for _, t := range tokens {
		// The forward pass checks tokens first; a stray caller's bad id is
		// an error at Sync, not a read outside the table.
		if t < 0 || int(t) >= w.Rows {
			b.enc.Failf("embed: token %d outside vocabulary of %d", t, w.Rows)
			return
		}
	}
	d := b.region("embed", dst, 0, len(tokens)*w.Cols)
	if b.enc.Err() != nil || len(tokens) == 0 {
		return
	}
	if w.Type == ggml.F32 && w.Cols%16 != 0 {
		// get_rows reads whole 16-element chunks; an F32 row of another
		// width (the conformance suite uploads through such tables) is a
		// copy, one per run of consecutive ids.
		n := w.Cols
		for i := 0; i < len(tokens); {
			j := i + 1
			for j < len(tokens) && tokens[j] == tokens[j-1]+1 {
				j++
			}
			b.enc.Copy(d, i*n, w.Region, int(tokens[i])*n, (j-i)*n)
			i = j
		}
		return
	}
	b.enc.Embed(d, w, tokens)
}

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32, rows int) {
	g := b.weight("rms_norm", w)
	if g == nil {
		return
	}
	n := rows * g.Cols
	d, s := b.region("rms_norm", dst, 0, n), b.region("rms_norm", x, 0, n)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	b.enc.RMSNorm(d, s, g, eps, rows)
}

func (b *Backend) MatMul(dst backend.Tensor, w backend.Weight, x backend.Tensor, rows int) {
	m := b.weight("matmul", w)
	if m == nil {
		return
	}
	d, s := b.region("matmul", dst, 0, rows*m.Rows), b.region("matmul", x, 0, rows*m.Cols)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	b.enc.MatMul(d, m, s, rows)
}

func (b *Backend) AddBias(x backend.Tensor, bias backend.Weight, rows int) {
	v := b.weight("add_bias", bias)
	if v == nil {
		return
	}
	d := b.region("add_bias", x, 0, rows*v.Cols)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	b.enc.AddBias(d, v, rows)
}

func (b *Backend) RoPE(x backend.Tensor, heads, headDim, rows int, pos []int32, r *backend.RoPE) {
	switch {
	case len(pos) < rows:
		b.enc.Failf("rope: %d positions for %d rows", len(pos), rows)
		return
	case r.Dims <= 0 || r.Dims > headDim || r.Dims%2 != 0:
		b.enc.Failf("rope: %d rotated dims of a head of %d", r.Dims, headDim)
		return
	case r.FreqFactors != nil && len(r.FreqFactors) != r.Dims/2:
		b.enc.Failf("rope: %d frequency factors for %d dims", len(r.FreqFactors), r.Dims)
		return
	}
	d := b.region("rope", x, 0, rows*heads*headDim)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	b.enc.RoPE(d, heads, headDim, rows, pos[:rows], r)
}

func (b *Backend) SwiGLU(dst, gate, up backend.Tensor, n int) {
	d, g, u := b.region("swiglu", dst, 0, n), b.region("swiglu", gate, 0, n), b.region("swiglu", up, 0, n)
	if b.enc.Err() != nil || n == 0 {
		return
	}
	b.enc.SwiGLU(d, g, u, n)
}

func (b *Backend) Add(dst, x backend.Tensor, n int) {
	d, s := b.region("add", dst, 0, n), b.region("add", x, 0, n)
	if b.enc.Err() != nil || n == 0 {
		return
	}
	b.enc.Add(d, s, n)
}

func (b *Backend) Copy(dst backend.Tensor, dstOff int, src backend.Tensor, srcOff, n int) {
	d, s := b.region("copy", dst, dstOff, n), b.region("copy", src, srcOff, n)
	if b.enc.Err() != nil || n == 0 {
		return
	}
	b.enc.Copy(d, dstOff, s, srcOff, n)
}

func (b *Backend) Argmax(dst, x backend.Tensor, rows, n int) {
	d, s := b.region("argmax", dst, 0, rows), b.region("argmax", x, 0, rows*n)
	if b.enc.Err() != nil || rows == 0 {
		return
	}
	if n <= 0 {
		b.enc.Failf("argmax: rows of %d elements", n)
		return
	}
	b.enc.Argmax(d, s, rows, n)
}

// Sync submits what was encoded since the last Sync and waits for it. An
// encoding error (an op whose arguments broke the contract) drops the whole
// list, as a failed command buffer would, and is returned.
func (b *Backend) Sync() error {
	if b.closed {
		return fmt.Errorf("metal: the backend is closed")
	}
	err := b.enc.Err()
	if err == nil {
		err = b.dev.Submit(b.enc.List())
	}
	// Wait even after an error: an earlier list may still be running.
	if serr := b.dev.Sync(); err == nil {
		err = serr
	}
	b.enc.Reset()
	b.releaseDead()
	return err
}

// releaseDead releases the buffers given back while encoded work could use
// them, once that work has run.
func (b *Backend) releaseDead() {
	for _, buf := range b.dead {
		buf.Release()
	}
	b.dead = b.dead[:0]
}

// Read copies len(dst) floats of src from float offset off (after Sync).
func (b *Backend) Read(dst []float32, src backend.Tensor, off int) {
	x := src.(*tensor)
	if x.freed || off < 0 || off+len(dst) > x.n {
		panic(fmt.Sprintf("metal: read of floats [%d, %d) of a tensor of %d (freed: %v)", off, off+len(dst), x.n, x.freed))
	}
	if len(dst) == 0 {
		return
	}
	mem := x.Buf.Bytes()[x.Off+4*off:]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(mem[4*i:]))
	}
}

// Close syncs and releases every buffer the backend holds (its tensors,
// caches and wrapped weights); the device stays open.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	err := b.dev.Sync()
	b.enc.Reset()
	b.releaseDead()
	for buf := range b.live {
		buf.Release()
	}
	b.live = map[device.Buffer]int{}
	b.enc.Close()
	b.allocated = 0
	b.closed = true
	return err
}
