package mtl

import (
	"errors"
	"testing"

	"nibble/metal/device"
	"nibble/metal/msl"
)

func TestSplitViews(t *testing.T) {
	const page = 16384
	for _, c := range []struct{ n, max, overlap int }{
		{10 * page, 100 * page, 0},
		{100 * page, 100 * page, 25 * page},
		{101 * page, 100 * page, 25 * page},
		{1000 * page, 100*page + 5, 25 * page},
		{977 * page, 64 * page, 16 * page},
	} {
		vs, err := splitViews(c.n, c.max, page, c.overlap)
		if err != nil {
			t.Fatal(err)
		}
		if vs[0].Off != 0 || vs[len(vs)-1].Off+vs[len(vs)-1].Len != c.n {
			t.Fatalf("%+v: views %v do not cover the region", c, vs)
		}
		for i, v := range vs {
			if v.Off%page != 0 || v.Len > c.max || v.Len <= 0 {
				t.Fatalf("%+v: view %d %+v", c, i, v)
			}
			if i > 0 && vs[i-1].Off+vs[i-1].Len-v.Off < c.overlap {
				t.Fatalf("%+v: views %d and %d overlap by less than %d", c, i-1, i, c.overlap)
			}
		}
		// Every span of up to overlap bytes is inside the view viewAt picks.
		for off := 0; off < c.n; off += 4093 {
			span := min(c.overlap, c.n-off)
			if len(vs) == 1 {
				span = c.n - off
			}
			v := vs[viewAt(vs, off)]
			if off < v.Off || off+span > v.Off+v.Len {
				t.Fatalf("%+v: span [%d,%d) not inside view %+v", c, off, off+span, v)
			}
		}
	}
	if _, err := splitViews(100*page, 10*page, page, 10*page); err == nil {
		t.Error("an overlap as long as the views was accepted")
	}
}

func TestPageSpan(t *testing.T) {
	if n, err := pageSpan(3*16384, 100, 16384); err != nil || n != 16384 {
		t.Errorf("aligned: %d, %v", n, err)
	}
	if _, err := pageSpan(3*16384+64, 100, 16384); !errors.Is(err, ErrAlignment) {
		t.Errorf("unaligned: %v", err)
	}
}

func TestConstants(t *testing.T) {
	unit, err := msl.Parse([]msl.Source{{Name: "k.metal", Text: `
constant bool has_bias [[function_constant(0)]];
constant half scale [[function_constant(1)]];
constant ushort n_rows [[function_constant(2)]];
kernel void kernel_k(device float * x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    if (has_bias) { x[i] += float(scale) * n_rows; }
}
`}})
	if err != nil {
		t.Fatal(err)
	}
	k := &unit.Kernels[0]
	cs, err := encodeConstants(unit.Constants, k, "kernel_k", []device.Constant{{Index: 2, Value: 7}, {Index: 0, Value: true}, {Index: 1, Value: float32(0.5)}})
	if err != nil {
		t.Fatal(err)
	}
	want := []constValue{{0, dataTypeBool, []byte{1}}, {1, dataTypeHalf, []byte{0x00, 0x38}}, {2, dataTypeUShort, []byte{7, 0}}}
	if pipelineKey("kernel_k", cs) != pipelineKey("kernel_k", want) {
		t.Errorf("constants %v, want %v", cs, want)
	}
	if _, err := encodeConstants(unit.Constants, k, "kernel_k", []device.Constant{{Index: 0, Value: true}}); err == nil {
		t.Error("a missing required constant was accepted")
	}
	if _, err := encodeConstants(unit.Constants, k, "kernel_k", []device.Constant{{Index: 0, Value: 1}, {Index: 1, Value: float32(1)}, {Index: 2, Value: 1}}); err == nil {
		t.Error("an int for a bool was accepted")
	}
	if _, err := encodeConstants(unit.Constants, k, "kernel_k", []device.Constant{{Index: 0, Value: true}, {Index: 1, Value: float32(1)}, {Index: 2, Value: 70000}}); err == nil {
		t.Error("70000 for a ushort was accepted")
	}
}

func TestCommandBufferErrors(t *testing.T) {
	if err := commandBufferError(statusCompleted, 0, ""); err != nil {
		t.Fatal(err)
	}
	for code, want := range map[int]error{
		cbErrorOutOfMemory: ErrOutOfMemory, cbErrorTimeout: ErrTimeout, cbErrorPageFault: ErrPageFault,
		cbErrorDeviceRemoved: ErrDeviceRemoved, cbErrorNotPermitted: ErrAccessRevoked, cbErrorInternal: ErrCommandBuffer,
	} {
		err := commandBufferError(statusError, code, "Execution of the command buffer was aborted")
		if !errors.Is(err, want) {
			t.Errorf("code %d: %v is not %v", code, err, want)
		}
		var cbe *CommandBufferError
		if !errors.As(err, &cbe) || cbe.Code != code {
			t.Errorf("code %d: %v", code, err)
		}
	}
}
