package encoder

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
)

// The kernels' argument structs (buffer(0), set inline): one Go type per
// `struct <name>_args` of the .metal sources, field for field in the same
// order, with the MSL name in the field's msl tag and a fixed-size type of
// the same size and kind (uint: uint32, int: int32, float: float32, ulong:
// uint64, long: int64). TestArgStructs parses the sources and holds each
// type to its struct: names, types and offsets (MSL aligns a scalar to its
// size and pads the struct to its widest field, as Go does on 64-bit
// systems).

// AttnArgs is attn_args (attention.metal), the argument of every attention
// kernel.
type AttnArgs struct {
	Heads       uint32  `msl:"heads"`
	Group       uint32  `msl:"group"`
	Chunks      uint32  `msl:"chunks"`
	Ctx         uint32  `msl:"ctx"`
	Lo          uint32  `msl:"lo"`
	N           uint32  `msl:"n"`
	Chunk       uint32  `msl:"chunk"`
	Splits      uint32  `msl:"splits"`
	Window      uint32  `msl:"window"`
	KVHeads     uint32  `msl:"kv_heads"`
	QScale      float32 `msl:"qscale"`
	Norm        float32 `msl:"norm"`
	ScoreStride uint32  `msl:"score_stride"`
	// Tail is the first position read from the residual window's ring,
	// RingRows its rows per kv head, Ring its byte offset in a plane.
	Tail     uint32 `msl:"tail"`
	RingRows uint32 `msl:"ring_rows"`
	Ring     uint64 `msl:"ring"`
}

// EWArgs is ew_args (elementwise.metal): elements (floats or float4s) per
// row.
type EWArgs struct {
	N uint32 `msl:"n"`
}

// EWScalarArgs is ew_scalar_args (elementwise.metal), for the elementwise
// kernels with a scalar operand (scale, softcap).
type EWScalarArgs struct {
	N uint32  `msl:"n"`
	S float32 `msl:"s"`
}

// GetRowsArgs is get_rows_args (get_rows.metal).
type GetRowsArgs struct {
	N         uint32 `msl:"n"`
	SrcStride uint32 `msl:"src_stride"`
	DstStride uint32 `msl:"dst_stride"`
}

// KVAppendArgs is kv_append_args (kv_append.metal).
type KVAppendArgs struct {
	D          uint32  `msl:"d"`
	GS         uint32  `msl:"gs"`
	KVHeads    uint32  `msl:"kv_heads"`
	Ctx        uint32  `msl:"ctx"`
	Pos        uint32  `msl:"pos"`
	N          uint32  `msl:"n"`
	Smooth     uint32  `msl:"smooth"`
	Rotate     uint32  `msl:"rotate"`
	Norm       float32 `msl:"norm"`
	VPS        uint32  `msl:"vps"`
	Window     uint32  `msl:"window"`
	RingFrom   uint32  `msl:"ring_from"`
	Meta       uint64  `msl:"meta"`
	Ring       uint64  `msl:"ring"`
	RopePairs  uint32  `msl:"rope_pairs"`
	RopeMScale float32 `msl:"rope_mscale"`
}

// MulMMArgs is mul_mm_args (mul_mm.metal).
type MulMMArgs struct {
	Cols    uint32 `msl:"cols"`
	Outs    uint32 `msl:"outs"`
	Rows    uint32 `msl:"rows"`
	WStride uint32 `msl:"w_stride"`
	XStride uint32 `msl:"x_stride"`
	DStride uint32 `msl:"d_stride"`
}

// MulMVArgs is mul_mv_args (mul_mv.metal).
type MulMVArgs struct {
	Cols    uint32  `msl:"cols"`
	Rows    uint32  `msl:"rows"`
	XRows   uint32  `msl:"xrows"`
	WStride uint32  `msl:"w_stride"`
	XStride uint32  `msl:"x_stride"`
	DStride uint32  `msl:"d_stride"`
	Split   uint32  `msl:"split"`
	Eps     float32 `msl:"eps"`
}

// MulMVIDArgs is mul_mv_id_args (mul_mv.metal).
type MulMVIDArgs struct {
	Cols         uint32 `msl:"cols"`
	Rows         uint32 `msl:"rows"`
	Experts      uint32 `msl:"experts"`
	K            uint32 `msl:"k"`
	XPerSlot     uint32 `msl:"x_per_slot"`
	WStride      uint32 `msl:"w_stride"`
	ExpertStride uint64 `msl:"expert_stride"`
	XStride      uint32 `msl:"x_stride"`
	DStride      uint32 `msl:"d_stride"`
	Split        uint32 `msl:"split"`
}

// MulMMIDArgs is mul_mm_id_args (mul_mm.metal).
type MulMMIDArgs struct {
	Cols         uint32 `msl:"cols"`
	Outs         uint32 `msl:"outs"`
	Rows         uint32 `msl:"rows"`
	K            uint32 `msl:"k"`
	XPerSlot     uint32 `msl:"x_per_slot"`
	WStride      uint32 `msl:"w_stride"`
	ExpertStride uint64 `msl:"expert_stride"`
	XStride      uint32 `msl:"x_stride"`
	DStride      uint32 `msl:"d_stride"`
}

// MulMMIDMapArgs is mul_mm_id_map_args (mul_mm.metal).
type MulMMIDMapArgs struct {
	Experts uint32 `msl:"experts"`
	Slots   uint32 `msl:"slots"`
	Rows    uint32 `msl:"rows"`
}

// MoERouteArgs is moe_route_args (moe.metal).
type MoERouteArgs struct {
	Experts uint32  `msl:"experts"`
	K       uint32  `msl:"k"`
	Gating  uint32  `msl:"gating"`
	Norm    uint32  `msl:"norm"`
	Scale   float32 `msl:"scale"`
}

// MoEBiasIDArgs is moe_bias_id_args (moe.metal).
type MoEBiasIDArgs struct {
	N       uint32 `msl:"n"`
	Experts uint32 `msl:"experts"`
}

// MoESumArgs is moe_sum_args (moe.metal).
type MoESumArgs struct {
	N uint32 `msl:"n"`
	K uint32 `msl:"k"`
}

// MoESwiGLUArgs is moe_swiglu_args (moe.metal).
type MoESwiGLUArgs struct {
	N     uint32  `msl:"n"`
	Alpha float32 `msl:"alpha"`
	Limit float32 `msl:"limit"`
}

// RMSNormArgs is rms_norm_args (rms_norm.metal).
type RMSNormArgs struct {
	N         uint32  `msl:"n"`
	SrcStride uint32  `msl:"src_stride"`
	DstStride uint32  `msl:"dst_stride"`
	Eps       float32 `msl:"eps"`
}

// RoPEArgs is rope_args (rope.metal).
type RoPEArgs struct {
	Heads   uint32  `msl:"heads"`
	HeadDim uint32  `msl:"head_dim"`
	Pairs   uint32  `msl:"pairs"`
	HPG     uint32  `msl:"hpg"`
	MScale  float32 `msl:"mscale"`
}

// Bytes are the arguments as the kernel reads them.
func (a AttnArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a EWArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a EWScalarArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a GetRowsArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a KVAppendArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MulMMArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MulMVArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MulMVIDArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MulMMIDArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MulMMIDMapArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MoERouteArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MoEBiasIDArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MoESumArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a MoESwiGLUArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a RMSNormArgs) Bytes() []byte { return argBytes(a) }

// Bytes are the arguments as the kernel reads them.
func (a RoPEArgs) Bytes() []byte { return argBytes(a) }

// argBytes packs an argument struct: each field little-endian (Apple GPUs
// and the emulator's hosts are) at its Go offset, which TestArgStructs
// holds to the MSL struct's; padding is zero. The types above hold only
// the kinds below.
func argBytes(a any) []byte {
	v := reflect.ValueOf(a)
	t := v.Type()
	b := make([]byte, t.Size())
	for i := range t.NumField() {
		f, at := v.Field(i), b[t.Field(i).Offset:]
		switch f.Kind() {
		case reflect.Uint32:
			binary.LittleEndian.PutUint32(at, uint32(f.Uint()))
		case reflect.Int32:
			binary.LittleEndian.PutUint32(at, uint32(f.Int()))
		case reflect.Float32:
			binary.LittleEndian.PutUint32(at, math.Float32bits(float32(f.Float())))
		case reflect.Uint64:
			binary.LittleEndian.PutUint64(at, f.Uint())
		case reflect.Int64:
			binary.LittleEndian.PutUint64(at, uint64(f.Int()))
		default:
			panic(fmt.Sprintf("encoder: argument field %s.%s of kind %s", t.Name(), t.Field(i).Name, f.Kind()))
		}
	}
	return b
}

// u32 is an argument field from an int the encoder has checked; one beyond
// 32 bits is a bug in that check.
func u32(v int) uint32 {
	if v < math.MinInt32 || v > math.MaxUint32 {
		panic(fmt.Sprintf("encoder: argument %d does not fit 32 bits", v))
	}
	return uint32(v)
}
