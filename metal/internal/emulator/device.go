//go:build linux

package emulator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"nibble/metal/device"
	"nibble/metal/internal/msltoc"
	"nibble/metal/msl"
)

// Order is the order in which the emulator runs the lanes of a simdgroup
// between switch points, the simdgroups of a threadgroup between barriers,
// and the threadgroups of a grid. Run a test in both: running them one after
// another can hide a missing barrier in one order but not in the other.
type Order int

const (
	Forward Order = iota
	Reverse
)

func (o Order) String() string {
	if o == Reverse {
		return "reverse"
	}
	return "forward"
}

// Options configure a Device.
type Options struct {
	// Clang is the compiler (default $NIBBLE_CLANG, else clang-19).
	Clang string
	// CacheDir holds the built libraries (default: the user cache
	// directory, nibble/msl-emulator).
	CacheDir string
	// Workers is the number of OS threads that run threadgroups (default:
	// one per CPU).
	Workers int
	// CFlags are extra compiler flags (they are part of the cache key).
	CFlags []string
}

// Device is the MSL emulator as a device.Device: kernels compiled with
// clang into a shared library, run on the CPU.
type Device struct {
	opt      Options
	cc       *compiler
	cacheDir string

	mu      sync.Mutex // order, closed, bufs; held by Submit while it queues
	order   Order
	closed  bool
	bufs    map[*buffer]struct{}
	pending sync.WaitGroup
	queue   chan []task

	// errMu is apart from mu: the executor records an error while Submit
	// may hold mu, blocked on a full queue.
	errMu sync.Mutex
	err   error // the first since the last Sync
}

var _ device.Device = (*Device)(nil)

// New returns an emulator device, or an error wrapping ErrNoCompiler when
// clang is missing.
func New(opt Options) (*Device, error) {
	cc, err := findCompiler(opt.Clang)
	if err != nil {
		return nil, err
	}
	dir := opt.CacheDir
	if dir == "" {
		dir = defaultCacheDir()
	}
	if opt.Workers < 0 || opt.Workers > 64 {
		return nil, fmt.Errorf("emulator: %d workers (0..64)", opt.Workers)
	}
	d := &Device{opt: opt, cc: cc, cacheDir: dir, bufs: map[*buffer]struct{}{}, queue: make(chan []task, 64)}
	go d.loop()
	return d, nil
}

// Name implements device.Device.
func (d *Device) Name() string { return "MSL emulator (" + d.cc.path + ")" }

// SetOrder sets the thread order of the dispatches submitted after it.
func (d *Device) SetOrder(o Order) {
	d.mu.Lock()
	d.order = o
	d.mu.Unlock()
}

// ---- libraries and pipelines ----

// Library is a set of sources built into one shared library.
type Library struct {
	dev     *Device
	c       *clib
	unit    *msltoc.Unit
	cached  bool
	kernels map[string]int // host name -> registry index
}

// NewLibrary implements device.Device: it translates the sources, builds
// them (or finds the build in the cache) and loads the library.
func (d *Device) NewLibrary(srcs []device.Source) (device.Library, error) {
	return d.Build(srcs)
}

// Build is NewLibrary with the concrete type.
func (d *Device) Build(srcs []device.Source) (*Library, error) {
	unit, err := msltoc.Translate(srcs)
	if err != nil {
		return nil, fmt.Errorf("translate: %w", err)
	}
	path, cached, err := build(d.cc, d.cacheDir, unit.Code, d.opt.CFlags)
	if err != nil {
		return nil, err
	}
	c, err := load(path)
	if err != nil {
		return nil, err
	}
	l := &Library{dev: d, c: c, unit: unit, cached: cached, kernels: map[string]int{}}
	// The registry the library built must be the one the pre-pass described.
	if n := int(c.kernelCount()); n != len(unit.Kernels) {
		return nil, fmt.Errorf("load %s: %d kernels registered, the sources have %d", path, n, len(unit.Kernels))
	}
	for i, k := range unit.Kernels {
		if name := c.kernelName(int32(i)); name != k.Name {
			return nil, fmt.Errorf("load %s: kernel %d is %q, the sources say %q", path, i, name, k.Name)
		}
		l.kernels[k.Name] = i
	}
	if n := int(c.constantCount()); n != len(unit.Constants) {
		return nil, fmt.Errorf("load %s: %d function constants registered, the sources have %d", path, n, len(unit.Constants))
	}
	return l, nil
}

// Cached reports whether the library came from the build cache.
func (l *Library) Cached() bool { return l.cached }

// Path is the shared library's file.
func (l *Library) Path() string { return l.c.path }

// Kernels lists the library's kernels.
func (l *Library) Kernels() []msl.Kernel { return l.unit.Kernels }

type pipeline struct {
	lib    *Library
	index  int
	kernel *msl.Kernel
	max    int
	consts [][2]uint64 // index, bits
}

func (p *pipeline) Name() string    { return p.kernel.Name }
func (p *pipeline) MaxThreads() int { return p.max }

// Pipeline implements device.Library. Every function constant the kernel
// names must be given unless the sources test is_function_constant_defined.
func (l *Library) Pipeline(name string, constants ...device.Constant) (device.Pipeline, error) {
	i, ok := l.kernels[name]
	if !ok {
		return nil, fmt.Errorf("pipeline %s: no such kernel", name)
	}
	k := &l.unit.Kernels[i]
	p := &pipeline{lib: l, index: i, kernel: k, max: device.MaxThreads}
	if k.MaxThreads > 0 && k.MaxThreads < p.max {
		p.max = k.MaxThreads
	}
	if len(constants) > maxConstants {
		return nil, fmt.Errorf("pipeline %s: %d function constants, at most %d", name, len(constants), maxConstants)
	}
	cs, err := device.EncodeConstants(l.unit.Constants, k, name, constants)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		// The runtime copies the constant's size in bytes from the low
		// end of the 8.
		var bits [8]byte
		copy(bits[:], c.Bytes)
		p.consts = append(p.consts, [2]uint64{uint64(c.Decl.Index), binary.LittleEndian.Uint64(bits[:])})
	}
	return p, nil
}

// ---- buffers ----

type buffer struct {
	dev      *Device
	mem      []byte
	owned    bool // mapped by NewBuffer (else wrapped host memory)
	released bool
}

func (b *buffer) Len() int      { return len(b.mem) }
func (b *buffer) Bytes() []byte { return b.mem }

// Release waits until no submitted work can use the buffer, then frees it.
func (b *buffer) Release() {
	d := b.dev
	d.pending.Wait()
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
	if b.owned {
		_ = syscall.Munmap(b.mem)
	}
	b.mem = nil
}

// NewBuffer implements device.Device: zeroed memory mapped outside the Go
// heap, like a shared MTLBuffer.
func (d *Device) NewBuffer(size int) (device.Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("new buffer of %d bytes", size)
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("new buffer of %d bytes: %w", size, err)
	}
	return d.addBuffer(&buffer{dev: d, mem: mem, owned: true})
}

// WrapMemory implements device.Device. The emulator needs no alignment.
func (d *Device) WrapMemory(mem []byte) (device.Buffer, error) {
	if len(mem) == 0 {
		return nil, errors.New("wrap memory: empty")
	}
	return d.addBuffer(&buffer{dev: d, mem: mem})
}

func (d *Device) addBuffer(b *buffer) (device.Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		if b.owned {
			_ = syscall.Munmap(b.mem)
		}
		return nil, errors.New("device is closed")
	}
	d.bufs[b] = struct{}{}
	return b, nil
}

// ---- command lists ----

type task struct {
	c     *clib
	d     desc
	keep  []any // what the pointers in d point into
	name  string
	index int
	of    int
}

// Submit implements device.Device.
func (d *Device) Submit(list *device.CommandList) error {
	ds := list.Dispatches()
	tasks := make([]task, 0, len(ds))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("submit: device is closed")
	}
	for i := range ds {
		t, err := d.prepare(&ds[i])
		if err != nil {
			return fmt.Errorf("submit: dispatch %d of %d: %w", i, len(ds), err)
		}
		t.index, t.of = i, len(ds)
		tasks = append(tasks, t)
	}
	if len(tasks) == 0 {
		return nil
	}
	d.pending.Add(1)
	d.queue <- tasks
	return nil
}

func (d *Device) prepare(x *device.Dispatch) (task, error) {
	if err := device.Check(x); err != nil {
		return task{}, err
	}
	p, ok := x.Pipeline.(*pipeline)
	if !ok || p.lib.dev != d {
		return task{}, fmt.Errorf("%s: pipeline of another device", x.Pipeline.Name())
	}
	t := task{c: p.lib.c, name: p.kernel.Name}
	t.d.kernel = uint64(p.index)
	t.d.order = uint64(d.order)
	t.d.workers = uint64(d.opt.Workers)
	for a := 0; a < 3; a++ {
		t.d.groups[a] = uint64(x.Groups[a])
		t.d.threads[a] = uint64(x.Threads[a])
	}
	for _, b := range x.Buffers {
		buf, ok := b.Buffer.(*buffer)
		if !ok || buf.dev != d || buf.released {
			return task{}, fmt.Errorf("%s: buffer(%d) is released or belongs to another device", p.kernel.Name, b.Index)
		}
		t.d.bufBound |= 1 << b.Index
		t.d.bufPtr[b.Index] = uint64(uintptr(unsafe.Pointer(&buf.mem[b.Offset])))
		t.d.bufLen[b.Index] = uint64(len(buf.mem) - b.Offset)
		t.keep = append(t.keep, buf.mem)
	}
	for _, in := range x.Inline {
		data := append([]byte(nil), in.Data...)
		t.d.bufBound |= 1 << in.Index
		t.d.bufPtr[in.Index] = uint64(uintptr(unsafe.Pointer(&data[0])))
		t.d.bufLen[in.Index] = uint64(len(data))
		t.keep = append(t.keep, data)
	}
	for i, n := range x.Threadgroup {
		t.d.tgLen[i] = uint64(n)
	}
	if err := device.CheckArgs(p.kernel, x); err != nil {
		return task{}, err
	}
	t.d.nconst = uint64(len(p.consts))
	for i, c := range p.consts {
		t.d.constIndex[i] = c[0]
		t.d.constBits[i][0] = c[1]
	}
	return t, nil
}

// loop runs the submitted lists in order. A failed dispatch ends its list
// (like a failed Metal command buffer); the error waits for Sync.
func (d *Device) loop() {
	for tasks := range d.queue {
		for i := range tasks {
			t := &tasks[i]
			err := t.c.run(&t.d)
			runtime.KeepAlive(t.keep)
			if err != nil {
				d.errMu.Lock()
				if d.err == nil {
					d.err = fmt.Errorf("dispatch %d of %d (%s): %w", t.index, t.of, t.name, err)
				}
				d.errMu.Unlock()
				break
			}
		}
		d.pending.Done()
	}
}

// Sync implements device.Device.
func (d *Device) Sync() error {
	d.pending.Wait()
	d.errMu.Lock()
	defer d.errMu.Unlock()
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
	close(d.queue)
	return err
}
