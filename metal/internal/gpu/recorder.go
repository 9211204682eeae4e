package gpu

import (
	"fmt"
	"maps"
	"slices"

	"nibble/metal/device"
	"nibble/metal/msl"
)

// Recorder is a device.Device that runs nothing: it records the dispatches
// submitted to it for a timing trace. Buffers are sizes; one gets memory
// only when the host touches its bytes (the encoder's uploads: token ids,
// positions, tables), and those bytes go into the trace. Everything else
// the harness fills with small random halves.
type Recorder struct {
	unit  *msl.Unit
	bufs  []*recBuf
	list  []recDispatch
	cores int
}

// H200Cores is the SMs of the GPU the traces are timed on (an NVIDIA
// H200), the core count the recorder and the tee report to the encoder.
const H200Cores = 132

type recBuf struct {
	id   int
	size int
	mem  []byte
}

func (b *recBuf) Len() int { return b.size }
func (b *recBuf) Bytes() []byte {
	if b.mem == nil {
		b.mem = make([]byte, b.size)
	}
	return b.mem
}
func (b *recBuf) Release() {}

type recPipe struct {
	name   string
	max    int
	consts []device.EncodedConstant
}

func (p *recPipe) Name() string    { return p.name }
func (p *recPipe) MaxThreads() int { return p.max }

type recLib struct{ r *Recorder }

func (l recLib) Pipeline(name string, consts ...device.Constant) (device.Pipeline, error) {
	for _, k := range l.r.unit.Kernels {
		if k.Name == name {
			m := k.MaxThreads
			if m == 0 {
				m = device.MaxThreads
			}
			enc, err := device.EncodeConstants(l.r.unit.Constants, nil, name, consts)
			if err != nil {
				return nil, err
			}
			return &recPipe{name: name, max: m, consts: enc}, nil
		}
	}
	return nil, fmt.Errorf("recorder: no kernel %s", name)
}

type recDispatch struct {
	d device.Dispatch
	p *recPipe
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{} }

func (r *Recorder) Name() string { return "recorder" }

// Cores is device.Cores: H200Cores unless SetCores says otherwise.
func (r *Recorder) Cores() int {
	if r.cores > 0 {
		return r.cores
	}
	return H200Cores
}

// SetCores sets the core count the encoder sizes grids for.
func (r *Recorder) SetCores(n int) { r.cores = n }

func (r *Recorder) NewLibrary(srcs []device.Source) (device.Library, error) {
	u, err := msl.Parse(srcs)
	if err != nil {
		return nil, err
	}
	r.unit = u
	return recLib{r}, nil
}

func (r *Recorder) NewBuffer(size int) (device.Buffer, error) {
	b := &recBuf{id: len(r.bufs), size: size}
	r.bufs = append(r.bufs, b)
	return b, nil
}

func (r *Recorder) WrapMemory(mem []byte) (device.Buffer, error) {
	b := &recBuf{id: len(r.bufs), size: len(mem), mem: mem}
	r.bufs = append(r.bufs, b)
	return b, nil
}

func (r *Recorder) Submit(list *device.CommandList) error {
	for _, d := range list.Dispatches() {
		p, ok := d.Pipeline.(*recPipe)
		if !ok {
			return fmt.Errorf("recorder: a pipeline of another device")
		}
		r.list = append(r.list, recDispatch{d: d, p: p})
	}
	return nil
}

func (r *Recorder) Sync() error  { return nil }
func (r *Recorder) Close() error { return nil }

// Len is the number of recorded dispatches.
func (r *Recorder) Len() int { return len(r.list) }

// Reset drops the recorded dispatches (buffers stay).
func (r *Recorder) Reset() { r.list = r.list[:0] }

// Write writes the recorded dispatches as trace dir/name, with info lines
// (key value, in key order) first.
func (r *Recorder) Write(dir, name string, info map[string]string) error {
	t, err := NewTrace(dir, name)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(info)) {
		t.Line("info %s %s", k, info[k])
	}
	for _, b := range r.bufs {
		blob := "-"
		if b.mem != nil {
			if blob, err = t.Blob(b.mem); err != nil {
				return err
			}
		}
		t.Line("buffer %d %d %s", b.id, b.size, blob)
	}
	id := func(b device.Buffer) int { return b.(*recBuf).id }
	for i := range r.list {
		rd := &r.list[i]
		writeDispatch(t, &rd.d, rd.p.name, rd.p.consts, id)
		t.Line("end")
	}
	return t.Close()
}
