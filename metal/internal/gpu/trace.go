// Package gpu runs the Metal kernels on an NVIDIA GPU: metal/internal/msltoc
// translates the unchanged .metal sources to CUDA (TranslateCUDA, with the
// shim in include/), and a C++ harness (harness.cu) replays dispatches that the Go
// side recorded. Two kinds of trace:
//
//   - check traces (TeeDevice): every dispatch of the encoder, run on the MSL
//     emulator, with the bytes of its bound buffers before and after; the
//     harness runs the same dispatch on the GPU from the same bytes and
//     compares what it wrote (the emulator is itself held to the Go twins by
//     the metal/shaders and metal tests);
//   - timing traces (Recorder, no emulator): the dispatches of an encoded
//     step over buffers that exist only as sizes; the harness fills them
//     with small random halves (finite in every float format) except for
//     what the host wrote (token ids, positions, arguments) and times each
//     dispatch.
//
// run.sh (on the GPU machine) builds and runs it all; export_test.go writes
// the traces and kernels.cu (go test ./metal/internal/gpu -run TestExport -args -out DIR).
package gpu

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"nibble/metal/device"
	"nibble/metal/internal/msltoc"
	"nibble/metal/msl"
	"nibble/metal/shaders"
)

// WriteKernels writes the CUDA translation of every shader to dir/kernels.cu.
func WriteKernels(dir string) (*msltoc.CUDA, error) {
	srcs, err := shaders.Sources()
	if err != nil {
		return nil, err
	}
	c, err := msltoc.TranslateCUDA(srcs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return c, os.WriteFile(filepath.Join(dir, "kernels.cu"), []byte(c.Code), 0o644)
}

// traceFormat is the manifest's version, its first line ("nibble-trace
// 2"); harness.cu's TRACE_FORMAT must match. The harness refuses another
// version, and (since 2) a dispatch whose inline argument block is not the
// size of the struct its kernel reads: such a trace was recorded against
// other kernels.
const traceFormat = 2

// Trace is a list of dispatches over numbered buffers, written as a text
// manifest with its blobs (content-addressed files under blobs/).
type Trace struct {
	dir   string
	w     *bufio.Writer
	f     *os.File
	blobs map[string]bool
	bytes int64
}

// NewTrace creates dir/name.trace; blobs go to dir/blobs.
func NewTrace(dir, name string) (*Trace, error) {
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name+".trace"))
	if err != nil {
		return nil, err
	}
	t := &Trace{dir: dir, f: f, w: bufio.NewWriter(f), blobs: map[string]bool{}}
	fmt.Fprintf(t.w, "nibble-trace %d\n", traceFormat)
	return t, nil
}

// Blob stores b and returns its name.
func (t *Trace) Blob(b []byte) (string, error) {
	h := sha256.Sum256(b)
	name := hex.EncodeToString(h[:12])
	if t.blobs[name] {
		return name, nil
	}
	path := filepath.Join(t.dir, "blobs", name)
	if _, err := os.Stat(path); err != nil {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return "", err
		}
		t.bytes += int64(len(b))
	}
	t.blobs[name] = true
	return name, nil
}

// Line writes one manifest line.
func (t *Trace) Line(format string, args ...any) { fmt.Fprintf(t.w, format+"\n", args...) }

// Close flushes the manifest.
func (t *Trace) Close() error {
	if err := t.w.Flush(); err != nil {
		return err
	}
	return t.f.Close()
}

// kernelInfo is what the trace writer needs of a kernel: which buffer
// indices it may write, and as what.
type kernelInfo struct {
	writes map[int]string // buffer index -> f32, f16 or u8
}

func kernelInfos(u *msl.Unit) map[string]kernelInfo {
	out := map[string]kernelInfo{}
	for _, k := range u.Kernels {
		ki := kernelInfo{writes: map[int]string{}}
		for _, p := range k.Params {
			if p.Attr != "buffer" {
				continue
			}
			ty := " " + strings.ReplaceAll(strings.ReplaceAll(p.Type, "*", " * "), "&", " & ") + " "
			if strings.Contains(ty, " const ") || strings.Contains(ty, " constant ") || !strings.Contains(ty, "*") {
				continue
			}
			// Float results unless the type says half; the KV planes
			// (codes and metadata) are compared as bytes.
			kind := "f32"
			switch {
			case strings.Contains(ty, " half "):
				kind = "f16"
			case strings.HasPrefix(k.Name, "kernel_kv_append"):
				kind = "u8"
			}
			ki.writes[p.Index] = kind
		}
		out[k.Name] = ki
	}
	return out
}

// writeDispatch writes a dispatch's launch lines (not its end); consts are
// its pipeline's function constants, encoded when the pipeline was made.
func writeDispatch(t *Trace, d *device.Dispatch, name string, consts []device.EncodedConstant, bufID func(device.Buffer) int) {
	t.Line("dispatch %s %d %d %d %d %d %d", name, d.Groups[0], d.Groups[1], d.Groups[2], d.Threads[0], d.Threads[1], d.Threads[2])
	for _, c := range consts {
		t.Line("const %d %s", c.Decl.Index, hex.EncodeToString(c.Bytes))
	}
	for _, b := range d.Buffers {
		t.Line("bind %d %d %d", b.Index, bufID(b.Buffer), b.Offset)
	}
	for _, in := range d.Inline {
		t.Line("inline %d %s", in.Index, hex.EncodeToString(in.Data))
	}
	for i, n := range d.Threadgroup {
		t.Line("tg %d %d", i, n)
	}
}
