package gpu

import (
	"fmt"
	"sort"

	"nibble/metal/device"
	"nibble/metal/msl"
)

// TeeDevice runs everything on another device (the MSL emulator) one
// dispatch at a time and writes a check trace: for up to PerKernel
// dispatches of each pipeline (kernel and constants), the bytes of every
// bound buffer before it and of every buffer it may write after it.
type TeeDevice struct {
	Inner     device.Device
	PerKernel int

	t     *Trace
	infos map[string]kernelInfo
	next  int
	seen  map[string]int
	err   error
	// Recorded counts the dispatches written; Ran those run.
	Recorded, Ran int
}

type teeBuf struct {
	id    int
	inner device.Buffer
}

func (b *teeBuf) Len() int      { return b.inner.Len() }
func (b *teeBuf) Bytes() []byte { return b.inner.Bytes() }
func (b *teeBuf) Release()      { b.inner.Release() }

type teePipe struct {
	inner  device.Pipeline
	key    string // name and encoded constants: PerKernel counts dispatches by it
	consts []device.EncodedConstant
}

func (p *teePipe) Name() string    { return p.inner.Name() }
func (p *teePipe) MaxThreads() int { return p.inner.MaxThreads() }

type teeLib struct {
	inner device.Library
	decls []msl.Constant
}

func (l teeLib) Pipeline(name string, consts ...device.Constant) (device.Pipeline, error) {
	p, err := l.inner.Pipeline(name, consts...)
	if err != nil {
		return nil, err
	}
	enc, err := device.EncodeConstants(l.decls, nil, name, consts)
	if err != nil {
		return nil, err
	}
	key := name
	for _, c := range enc {
		key += fmt.Sprintf(";%d=%x", c.Decl.Index, c.Bytes)
	}
	return &teePipe{inner: p, key: key, consts: enc}, nil
}

// Cores is device.Cores: the check trace's dispatches have the grids of
// the GPU they are checked on (H200Cores), the emulator runs them alike.
func (d *TeeDevice) Cores() int { return H200Cores }

// NewTee writes trace dir/name of what runs on inner.
func NewTee(inner device.Device, dir, name string, perKernel int) (*TeeDevice, error) {
	t, err := NewTrace(dir, name)
	if err != nil {
		return nil, err
	}
	return &TeeDevice{Inner: inner, PerKernel: perKernel, t: t, seen: map[string]int{}}, nil
}

func (d *TeeDevice) Name() string { return "tee(" + d.Inner.Name() + ")" }

func (d *TeeDevice) NewLibrary(srcs []device.Source) (device.Library, error) {
	u, err := msl.Parse(srcs)
	if err != nil {
		return nil, err
	}
	d.infos = kernelInfos(u)
	lib, err := d.Inner.NewLibrary(srcs)
	if err != nil {
		return nil, err
	}
	return teeLib{lib, u.Constants}, nil
}

func (d *TeeDevice) wrap(b device.Buffer, err error) (device.Buffer, error) {
	if err != nil {
		return nil, err
	}
	tb := &teeBuf{id: d.next, inner: b}
	d.next++
	d.t.Line("buffer %d %d -", tb.id, b.Len())
	return tb, nil
}

func (d *TeeDevice) NewBuffer(size int) (device.Buffer, error) {
	return d.wrap(d.Inner.NewBuffer(size))
}
func (d *TeeDevice) WrapMemory(mem []byte) (device.Buffer, error) {
	return d.wrap(d.Inner.WrapMemory(mem))
}

func (d *TeeDevice) Submit(list *device.CommandList) error {
	for _, x := range list.Dispatches() {
		if d.err != nil {
			return nil
		}
		p, ok := x.Pipeline.(*teePipe)
		if !ok {
			return fmt.Errorf("tee: a pipeline of another device")
		}
		in := x
		in.Pipeline = p.inner
		in.Buffers = make([]device.Binding, len(x.Buffers))
		bound := map[int]*teeBuf{}
		for i, b := range x.Buffers {
			tb := b.Buffer.(*teeBuf)
			in.Buffers[i] = device.Binding{Index: b.Index, Buffer: tb.inner, Offset: b.Offset}
			bound[tb.id] = tb
		}
		rec := d.seen[p.key] < d.PerKernel
		var ids []int
		for id := range bound {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		before := map[int]string{}
		if rec {
			for _, id := range ids {
				name, err := d.t.Blob(bound[id].Bytes())
				if err != nil {
					return err
				}
				before[id] = name
			}
		}
		var l device.CommandList
		l.Add(in)
		if err := d.Inner.Submit(&l); err != nil {
			return err
		}
		if err := d.Inner.Sync(); err != nil {
			d.err = err
			return nil
		}
		d.Ran++
		if !rec {
			continue
		}
		d.seen[p.key]++
		d.Recorded++
		writeDispatch(d.t, &x, p.Name(), p.consts, func(b device.Buffer) int { return b.(*teeBuf).id })
		for _, id := range ids {
			d.t.Line("before %d %s", id, before[id])
		}
		// What the kernel may write: buffers bound at its non-const pointers.
		kinds := map[int]string{}
		for _, b := range x.Buffers {
			if k, ok := d.infos[p.Name()].writes[b.Index]; ok {
				id := b.Buffer.(*teeBuf).id
				if prev, ok := kinds[id]; ok && prev != k {
					k = "u8"
				}
				kinds[id] = k
			}
		}
		for _, id := range ids {
			k, ok := kinds[id]
			if !ok {
				continue
			}
			name, err := d.t.Blob(bound[id].Bytes())
			if err != nil {
				return err
			}
			d.t.Line("after %d %s %s", id, name, k)
		}
		d.t.Line("end")
	}
	return nil
}

func (d *TeeDevice) Sync() error {
	err := d.err
	d.err = nil
	return err
}

// Close ends the trace (the inner device stays open).
func (d *TeeDevice) Close() error { return d.t.Close() }
