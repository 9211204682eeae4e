//go:build darwin

package mtl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego/objc"

	"nibble/engine/sysmem"
	"nibble/metal/device"
	"nibble/metal/msl"
)

// residentMin is the smallest NewBuffer that joins the residency set: the
// KV planes and workspaces (and every wrapped weight region) are pinned;
// per-step activations, a few KiB to MiB, are used by every command buffer
// anyway and would only make the set churn.
const residentMin = 1 << 20

// Device is the system's default Metal device as a device.Device.
type Device struct {
	dev   objc.ID // id<MTLDevice>
	queue objc.ID // id<MTLCommandQueue>
	name  string
	page  int

	maxBuffer int
	overlap   int // of the views of a region longer than maxBuffer

	mu      sync.Mutex
	closed  bool
	bufs    map[*buffer]struct{}
	libs    []*Library
	pending []objc.ID // committed command buffers (retained), oldest first
	err     error     // a Submit-time error held for Sync
	gpuTime time.Duration

	// The residency set (macOS 15+), 0 when there is none.
	rs        objc.ID
	rsDirty   bool
	rsReq     bool
	residency string
}

var _ device.Device = (*Device)(nil)

// Open returns the system default Metal device. It fails with an error
// wrapping ErrNoDevice when there is none (or Metal cannot be loaded).
func Open() (*Device, error) {
	if err := bind(); err != nil {
		return nil, err
	}
	d := &Device{bufs: map[*buffer]struct{}{}}
	var err error
	withPool(func() {
		d.dev = rt.createSystemDefaultDevice() // owned (a Create function)
		if d.dev == 0 {
			err = fmt.Errorf("%w: MTLCreateSystemDefaultDevice returned nil", ErrNoDevice)
			return
		}
		d.name = goString(rt.msg(d.dev, sl(selDeviceName)))
		d.queue = rt.msg(d.dev, sl(selNewCommandQueue))
		if d.queue == 0 {
			err = fmt.Errorf("%w: newCommandQueue returned nil", ErrNoDevice)
			return
		}
		d.maxBuffer = int(min(rt.msgUint(d.dev, sl(selMaxBufferLength)), 1<<62))
		d.setupResidency()
	})
	if err != nil {
		d.releaseAll()
		return nil, err
	}
	page, perr := sysmem.Sysctl("hw.pagesize")
	if perr != nil || page == 0 {
		page = 16384 // Apple silicon
	}
	d.page = int(page)
	d.overlap = d.maxBuffer / 4 / d.page * d.page
	return d, nil
}

// setupResidency makes the residency set that pins the weights and the KV
// cache (macOS 15+): one set, attached to the queue so every command buffer
// carries it (addResidencySet:), committed when buffers join or leave it,
// and requested resident once (requestResidency), which keeps its pages
// wired between steps. On macOS 14 there is no such API: Metal makes a
// command buffer's buffers resident when it is committed and may page them
// out between steps under memory pressure.
func (d *Device) setupResidency() {
	if !respondsTo(d.dev, selNewResidencySetWithDescriptor) || rt.classes["MTLResidencySetDescriptor"] == 0 {
		d.residency = "no residency set (macOS 14 or earlier): Metal makes buffers resident per command buffer and may page weights out between steps"
		return
	}
	desc := newObject("MTLResidencySetDescriptor")
	defer release(desc)
	rt.msgID(desc, sl(selSetLabel), nsString("nibble weights and KV cache"))
	rt.msgSetUint(desc, sl(selSetInitialCapacity), 64)
	var e objc.ID
	rs := rt.msgErr1(d.dev, sl(selNewResidencySetWithDescriptor), desc, &e)
	if rs == 0 {
		_, text := nsErrorText(e)
		d.residency = "no residency set: newResidencySetWithDescriptor failed: " + text
		return
	}
	d.rs = rs
	rt.msgID(d.queue, sl(selAddResidencySet), rs)
	d.residency = "residency set"
}

// Name implements device.Device: the GPU's name, e.g. "Apple M2 Pro".
func (d *Device) Name() string { return d.name }

// Residency says how buffers are pinned, for Diagnostics: "residency set"
// on macOS 15+, else why not.
func (d *Device) Residency() string { return d.residency }

// MaxBufferLength is the device's maxBufferLength: longer regions are
// wrapped as several overlapping views.
func (d *Device) MaxBufferLength() int { return d.maxBuffer }

// ViewOverlap is how much consecutive views of a region longer than
// MaxBufferLength overlap (a quarter of it, whole pages): a binding reaches
// at least this many bytes from its offset, so a tensor up to this size is
// served whole. Larger tensors in such a region are not supported.
func (d *Device) ViewOverlap() int { return d.overlap }

// Views is how WrapMemory splits a region of n bytes into MTLBuffers.
func (d *Device) Views(n int) ([]View, error) {
	return splitViews((n+d.page-1)/d.page*d.page, d.maxBuffer, d.page, d.overlap)
}

// GPUTime is the GPU time of the command buffers Sync has waited for
// (GPUEndTime - GPUStartTime), summed since the device was opened.
func (d *Device) GPUTime() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gpuTime
}

// ---- memory figures ----

// Memory is what Metal and the kernel say about GPU memory.
type Memory struct {
	RecommendedMaxWorkingSet uint64 // recommendedMaxWorkingSetSize
	CurrentAllocated         uint64 // currentAllocatedSize
	MaxBufferLength          uint64
	UnifiedMemory            bool
	MemSize                  uint64 // sysctl hw.memsize
	WiredLimitMB             uint64 // sysctl iogpu.wired_limit_mb (0: the default applies)
}

// Memory reads the device's figures and the sysctls.
func (d *Device) Memory() Memory { return memoryOf(d.dev) }

// memoryOf reads the figures of an id<MTLDevice> and the sysctls.
func memoryOf(dev objc.ID) Memory {
	m := Memory{
		RecommendedMaxWorkingSet: rt.msgUint(dev, sl(selRecommendedMaxWorkingSetSize)),
		CurrentAllocated:         rt.msgUint(dev, sl(selCurrentAllocatedSize)),
		MaxBufferLength:          rt.msgUint(dev, sl(selMaxBufferLength)),
		UnifiedMemory:            rt.msgBool(dev, sl(selHasUnifiedMemory)),
	}
	m.MemSize, _ = sysmem.Sysctl("hw.memsize")
	m.WiredLimitMB, _ = sysmem.Sysctl("iogpu.wired_limit_mb") // absent on Intel Macs
	return m
}

// ---- libraries and pipelines ----

// Library is the kernels compiled by Metal from source.
type Library struct {
	dev       *Device
	lib       objc.ID // id<MTLLibrary>
	unit      *msl.Unit
	kernels   map[string]*msl.Kernel
	pipelines map[string]*pipeline
	// CompileTime is how long newLibraryWithSource took.
	CompileTime time.Duration
}

// NewLibrary implements device.Device. The sources are joined by
// msl.Concat (a #line before each, so Metal's errors name the .metal file
// and line) and compiled by newLibraryWithSource:options:error: with fast
// math and MSL 3.0 (macOS 13+). Nibble does not cache it. Metal compiles
// source in two steps, MSL to Metal IR and IR to the GPU's binary (Apple's
// "Metal libraries" documentation); the system's shader cache keeps the
// second across launches (implicitly, and it may be purged: Blender's Metal
// backend adds binary archives for that reason), the first runs at every
// start. Caching it means shipping a .metallib or an MTLBinaryArchive per
// macOS version: worth it only if the compile time metalcheck prints is
// long on a Mac (Library.CompileTime). The sources are parsed too
// (msl.Parse, the parse the emulator's translation is written from), for
// the kernels' function constants and parameters, so pipelines and
// dispatches are checked by the same rules as on Linux.
func (d *Device) NewLibrary(srcs []device.Source) (device.Library, error) {
	return d.Build(srcs)
}

// Build is NewLibrary with the concrete type.
func (d *Device) Build(srcs []device.Source) (*Library, error) {
	unit, err := msl.Parse(srcs)
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	text := msl.Concat(srcs)
	l := &Library{dev: d, unit: unit, kernels: map[string]*msl.Kernel{}, pipelines: map[string]*pipeline{}}
	for i := range unit.Kernels {
		l.kernels[unit.Kernels[i].Name] = &unit.Kernels[i]
	}
	t0 := time.Now()
	withPool(func() {
		opts := newObject("MTLCompileOptions")
		defer release(opts)
		if respondsTo(opts, selSetMathMode) { // macOS 15: fastMathEnabled is deprecated
			rt.msgSetInt(opts, sl(selSetMathMode), mathModeFast)
		} else {
			rt.msgSetBool(opts, sl(selSetFastMathEnabled), true)
		}
		rt.msgSetUint(opts, sl(selSetLanguageVersion), languageVersion3_0)
		var e objc.ID
		l.lib = rt.msgErr2(d.dev, sl(selNewLibraryWithSource), nsString(text), opts, &e)
		if l.lib == 0 {
			_, desc := nsErrorText(e)
			err = fmt.Errorf("%w:\n%s", ErrCompile, desc)
		}
	})
	if err != nil {
		return nil, err
	}
	l.CompileTime = time.Since(t0)
	d.mu.Lock()
	d.libs = append(d.libs, l)
	d.mu.Unlock()
	return l, nil
}

type pipeline struct {
	lib    *Library
	pso    objc.ID // id<MTLComputePipelineState>
	kernel *msl.Kernel
	max    int
}

func (p *pipeline) Name() string    { return p.kernel.Name }
func (p *pipeline) MaxThreads() int { return p.max }

// Pipeline implements device.Library: the kernel specialised by its
// function constants (MTLFunctionConstantValues, setConstantValue:type:atIndex:),
// cached by name and constants.
func (l *Library) Pipeline(name string, constants ...device.Constant) (device.Pipeline, error) {
	k, ok := l.kernels[name]
	if !ok {
		return nil, fmt.Errorf("pipeline %s: no such kernel", name)
	}
	cs, err := encodeConstants(l.unit.Constants, k, name, constants)
	if err != nil {
		return nil, err
	}
	key := pipelineKey(name, cs)
	if p := l.pipelines[key]; p != nil {
		return p, nil
	}
	p := &pipeline{lib: l, kernel: k}
	withPool(func() {
		fcv := newObject("MTLFunctionConstantValues")
		defer release(fcv)
		for _, c := range cs {
			rt.msgSetConst(fcv, sl(selSetConstantValueTypeAtIndex), unsafe.Pointer(&c.bytes[0]), uint64(c.typ), uint64(c.index))
			runtime.KeepAlive(c.bytes)
		}
		var e objc.ID
		fn := rt.msgErr2(l.lib, sl(selNewFunctionWithNameConstantValues), nsString(name), fcv, &e)
		if fn == 0 {
			_, desc := nsErrorText(e)
			err = fmt.Errorf("pipeline %s: %s", name, desc)
			return
		}
		defer release(fn)
		e = 0
		p.pso = rt.msgErr1(l.dev.dev, sl(selNewComputePipelineStateWithFunction), fn, &e)
		if p.pso == 0 {
			_, desc := nsErrorText(e)
			err = fmt.Errorf("pipeline %s: %s", name, desc)
			return
		}
		p.max = int(rt.msgUint(p.pso, sl(selMaxTotalThreadsPerThreadgroup)))
	})
	if err != nil {
		return nil, err
	}
	p.max = min(p.max, device.MaxThreads)
	l.pipelines[key] = p
	return p, nil
}

// Kernels lists the library's kernels.
func (l *Library) Kernels() []msl.Kernel { return l.unit.Kernels }

func (l *Library) release() {
	for _, p := range l.pipelines {
		release(p.pso)
	}
	l.pipelines = nil
	release(l.lib)
	l.lib = 0
}

// ---- buffers ----

type buffer struct {
	dev      *Device
	mem      []byte
	views    []View    // one for NewBuffer and a region within maxBufferLength
	objs     []objc.ID // id<MTLBuffer>, one per view
	resident bool
	released bool
}

func (b *buffer) Len() int      { return len(b.mem) }
func (b *buffer) Bytes() []byte { return b.mem }

// Release waits for the submitted work (which may bind the buffer), then
// releases its MTLBuffers. Wrapped memory stays the caller's.
func (b *buffer) Release() {
	d := b.dev
	_ = d.wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.releaseLocked(b)
}

func (d *Device) releaseLocked(b *buffer) {
	if b.released {
		return
	}
	b.released = true
	delete(d.bufs, b)
	withPool(func() {
		for _, o := range b.objs {
			if b.resident && d.rs != 0 {
				rt.msgID(d.rs, sl(selRemoveAllocation), o)
				d.rsDirty = true
			}
			release(o)
		}
	})
	b.objs, b.mem = nil, nil
}

// NewBuffer implements device.Device: newBufferWithLength:options: in
// shared storage (CPU and GPU see the same memory; Metal zero-fills it).
func (d *Device) NewBuffer(size int) (device.Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("new buffer of %d bytes", size)
	}
	if size > d.maxBuffer {
		return nil, fmt.Errorf("%w: a buffer of %d bytes is longer than the device's maxBufferLength (%d)", ErrOutOfMemory, size, d.maxBuffer)
	}
	var obj objc.ID
	var p unsafe.Pointer
	withPool(func() {
		obj = rt.msgNewBuf(d.dev, sl(selNewBufferWithLength), uint64(size), resourceStorageModeShared)
		if obj != 0 {
			p = rt.msgPtr(obj, sl(selContents))
		}
	})
	if obj == 0 || p == nil {
		release(obj)
		return nil, fmt.Errorf("%w: newBufferWithLength %d bytes failed", ErrOutOfMemory, size)
	}
	b := &buffer{dev: d, mem: unsafe.Slice((*byte)(p), size), views: []View{{0, size}}, objs: []objc.ID{obj}}
	return d.addBuffer(b, size >= residentMin)
}

// WrapMemory implements device.Device with newBufferWithBytesNoCopy:
// (no copy, no deallocator: the memory stays the caller's, valid until
// Release). The memory must start on a page (a file mapping does), else
// the error wraps ErrAlignment; its length is rounded up to whole pages.
// A region longer than maxBufferLength becomes several MTLBuffers that
// overlap by ViewOverlap bytes (as llama.cpp's Metal backend does); a
// binding uses the view that starts last at or before its offset.
func (d *Device) WrapMemory(mem []byte) (device.Buffer, error) {
	if len(mem) == 0 {
		return nil, errors.New("wrap memory: empty")
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	n, err := pageSpan(uintptr(base), len(mem), d.page)
	if err != nil {
		return nil, err
	}
	vs, err := splitViews(n, d.maxBuffer, d.page, d.overlap)
	if err != nil {
		return nil, fmt.Errorf("wrap memory: %w", err)
	}
	b := &buffer{dev: d, mem: mem, views: vs}
	withPool(func() {
		for _, v := range vs {
			o := rt.msgNoCopy(d.dev, sl(selNewBufferWithBytesNoCopy), unsafe.Add(base, v.Off), uint64(v.Len), resourceStorageModeShared, 0)
			if o == 0 {
				err = fmt.Errorf("%w: newBufferWithBytesNoCopy of %d bytes at offset %d failed", ErrOutOfMemory, v.Len, v.Off)
				return
			}
			b.objs = append(b.objs, o)
		}
	})
	if err != nil {
		for _, o := range b.objs {
			release(o)
		}
		return nil, err
	}
	return d.addBuffer(b, true)
}

func (d *Device) addBuffer(b *buffer, resident bool) (device.Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		for _, o := range b.objs {
			release(o)
		}
		return nil, errors.New("device is closed")
	}
	d.bufs[b] = struct{}{}
	if resident && d.rs != 0 {
		b.resident = true
		withPool(func() {
			for _, o := range b.objs {
				rt.msgID(d.rs, sl(selAddAllocation), o)
			}
		})
		d.rsDirty = true
	}
	return b, nil
}

// commitResidency applies the set's pending changes before a submit
// (commit) and asks once for residency (requestResidency).
func (d *Device) commitResidency() {
	if d.rs == 0 || !d.rsDirty {
		return
	}
	rt.msg(d.rs, sl(selResidencyCommit))
	d.rsDirty = false
	if !d.rsReq {
		rt.msg(d.rs, sl(selRequestResidency))
		d.rsReq = true
	}
}

// ResidentBytes is the residency set's allocatedSize at its last commit (0
// without a set).
func (d *Device) ResidentBytes() uint64 {
	if d.rs == 0 {
		return 0
	}
	return rt.msgUint(d.rs, sl(selAllocatedSize))
}

// ---- command lists ----

// binding resolves a binding to an MTLBuffer and an offset in it.
func (d *Device) binding(name string, b device.Binding) (objc.ID, int, error) {
	buf, ok := b.Buffer.(*buffer)
	if !ok || buf.dev != d || buf.released {
		return 0, 0, fmt.Errorf("%s: buffer(%d) is released or belongs to another device", name, b.Index)
	}
	i := viewAt(buf.views, b.Offset)
	return buf.objs[i], b.Offset - buf.views[i].Off, nil
}

// check validates a dispatch as the emulator does: device.Check, then
// device.CheckArgs.
func (d *Device) check(x *device.Dispatch) (*pipeline, error) {
	if err := device.Check(x); err != nil {
		return nil, err
	}
	p, ok := x.Pipeline.(*pipeline)
	if !ok || p.lib.dev != d || p.pso == 0 {
		return nil, fmt.Errorf("%s: pipeline of another device", x.Pipeline.Name())
	}
	if err := device.CheckArgs(p.kernel, x); err != nil {
		return nil, err
	}
	return p, nil
}

// Submit implements device.Device: one MTLCommandBuffer per list, one
// compute encoder in it. The encoder's default dispatch type is serial
// (MTLDispatchTypeSerial), so each dispatch sees the results of the ones
// before it, as the device contract says. The list is validated whole
// before anything is encoded.
func (d *Device) Submit(list *device.CommandList) error {
	ds := list.Dispatches()
	// The resolved pipelines, and the bindings of every dispatch in one
	// slice (two allocations per list, not per dispatch).
	type bound struct {
		obj objc.ID
		off int
	}
	n := 0
	for i := range ds {
		n += len(ds[i].Buffers)
	}
	ps := make([]*pipeline, len(ds))
	bs := make([]bound, 0, n)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("submit: device is closed")
	}
	for i := range ds {
		p, err := d.check(&ds[i])
		if err == nil {
			ps[i] = p
			for _, b := range ds[i].Buffers {
				var o objc.ID
				var off int
				if o, off, err = d.binding(p.kernel.Name, b); err != nil {
					break
				}
				bs = append(bs, bound{o, off})
			}
		}
		if err != nil {
			return fmt.Errorf("submit: dispatch %d of %d: %w", i, len(ds), err)
		}
	}
	if len(ds) == 0 {
		return nil
	}
	var err error
	withPool(func() {
		d.commitResidency()
		cb := rt.msg(d.queue, sl(selCommandBuffer)) // autoreleased
		if cb == 0 {
			err = fmt.Errorf("%w: commandBuffer returned nil", ErrOutOfMemory)
			return
		}
		enc := rt.msg(cb, sl(selComputeCommandEncoder)) // autoreleased
		if enc == 0 {
			err = fmt.Errorf("%w: computeCommandEncoder returned nil", ErrOutOfMemory)
			return
		}
		for i := range ds {
			x := &ds[i]
			rt.msgID(enc, sl(selSetComputePipelineState), ps[i].pso)
			for _, b := range x.Buffers {
				rt.msgSetBuf(enc, sl(selSetBufferOffsetAtIndex), bs[0].obj, uint64(bs[0].off), uint64(b.Index))
				bs = bs[1:]
			}
			for _, in := range x.Inline {
				// setBytes copies the bytes into the command buffer now.
				rt.msgSetBytes(enc, sl(selSetBytesLengthAtIndex), unsafe.Pointer(&in.Data[0]), uint64(len(in.Data)), uint64(in.Index))
				runtime.KeepAlive(in.Data)
			}
			for j, n := range x.Threadgroup {
				if n > 0 {
					rt.msgSetTG(enc, sl(selSetThreadgroupMemoryLengthAtIndex), uint64(n), uint64(j))
				}
			}
			g, t := x.Groups, x.Threads
			rt.msgDispatch(enc, sl(selDispatchThreadgroups),
				mtlSize{uint64(g[0]), uint64(g[1]), uint64(g[2])}, mtlSize{uint64(t[0]), uint64(t[1]), uint64(t[2])})
		}
		rt.msg(enc, sl(selEndEncoding))
		rt.msg(cb, sl(selCommandBufferCommit))
		d.pending = append(d.pending, retain(cb)) // kept past the pool until Sync
	})
	return err
}

// wait waits for every committed command buffer and returns the first
// failure as a typed error (CommandBufferError wrapping ErrOutOfMemory,
// ErrTimeout, ...), which is also held for the next Sync.
func (d *Device) wait() error {
	d.mu.Lock()
	pending := d.pending
	d.pending = nil
	d.mu.Unlock()
	var first error
	var gpu time.Duration
	withPool(func() {
		for _, cb := range pending {
			rt.msg(cb, sl(selWaitUntilCompleted))
			status := int(rt.msgUint(cb, sl(selStatus)))
			if status == statusCompleted {
				start, end := rt.msgF64(cb, sl(selGPUStartTime)), rt.msgF64(cb, sl(selGPUEndTime))
				gpu += time.Duration((end - start) * float64(time.Second))
			} else if first == nil {
				code, desc := nsErrorText(rt.msg(cb, sl(selError)))
				first = commandBufferError(status, code, desc)
			}
			release(cb)
		}
	})
	d.mu.Lock()
	d.gpuTime += gpu
	if first != nil && d.err == nil {
		d.err = first
	}
	d.mu.Unlock()
	return first
}

// Sync implements device.Device: it waits for everything submitted and
// returns the first error since the previous Sync.
func (d *Device) Sync() error {
	_ = d.wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.err
	d.err = nil
	return err
}

// Close implements device.Device.
func (d *Device) Close() error {
	err := d.Sync()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return err
	}
	d.closed = true
	for b := range d.bufs {
		d.releaseLocked(b)
	}
	withPool(func() {
		if d.rs != 0 {
			rt.msg(d.rs, sl(selEndResidency))
		}
		for _, l := range d.libs {
			l.release()
		}
	})
	d.libs = nil
	d.releaseAll()
	return err
}

func (d *Device) releaseAll() {
	withPool(func() {
		release(d.rs)
		release(d.queue)
		release(d.dev)
	})
	d.rs, d.queue, d.dev = 0, 0, 0
}
