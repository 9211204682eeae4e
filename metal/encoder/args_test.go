package encoder

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"nibble/metal/msl"
	"nibble/metal/shaders"
)

// argTypes maps each `struct <name>_args` of the .metal sources to the Go
// type the encoder packs it with.
var argTypes = map[string]reflect.Type{
	"attn_args":          reflect.TypeFor[AttnArgs](),
	"copy_rows_args":     reflect.TypeFor[CopyRowsArgs](),
	"ew_args":            reflect.TypeFor[EWArgs](),
	"ew_scalar_args":     reflect.TypeFor[EWScalarArgs](),
	"get_rows_args":      reflect.TypeFor[GetRowsArgs](),
	"kv_append_args":     reflect.TypeFor[KVAppendArgs](),
	"mul_mm_args":        reflect.TypeFor[MulMMArgs](),
	"mul_mv_args":        reflect.TypeFor[MulMVArgs](),
	"mul_mv_id_args":     reflect.TypeFor[MulMVIDArgs](),
	"mul_mm_id_args":     reflect.TypeFor[MulMMIDArgs](),
	"mul_mm_id_map_args": reflect.TypeFor[MulMMIDMapArgs](),
	"moe_route_args":     reflect.TypeFor[MoERouteArgs](),
	"moe_bias_id_args":   reflect.TypeFor[MoEBiasIDArgs](),
	"moe_sum_args":       reflect.TypeFor[MoESumArgs](),
	"moe_swiglu_args":    reflect.TypeFor[MoESwiGLUArgs](),
	"rms_norm_args":      reflect.TypeFor[RMSNormArgs](),
	"rope_args":          reflect.TypeFor[RoPEArgs](),
	"scale_id_args":      reflect.TypeFor[ScaleIDArgs](),
}

// mslScalar is an MSL scalar or vector type of an argument struct: its
// size, its alignment and the Go kind that stands for it (vectors have
// none: an argument struct holds scalars).
type mslScalar struct {
	size, align int
	kind        reflect.Kind
}

// mslScalars are the Metal Shading Language specification's sizes and
// alignments (table 2.2 and 2.3: a scalar aligned to its size; a vector of
// 2 or 4 to its size, of 3 as of 4).
var mslScalars = map[string]mslScalar{
	"bool": {1, 1, reflect.Bool}, "char": {1, 1, reflect.Int8}, "uchar": {1, 1, reflect.Uint8},
	"int8_t": {1, 1, reflect.Int8}, "uint8_t": {1, 1, reflect.Uint8},
	"short": {2, 2, reflect.Int16}, "ushort": {2, 2, reflect.Uint16},
	"int16_t": {2, 2, reflect.Int16}, "uint16_t": {2, 2, reflect.Uint16},
	"half": {2, 2, reflect.Invalid}, "bfloat": {2, 2, reflect.Invalid},
	"int": {4, 4, reflect.Int32}, "uint": {4, 4, reflect.Uint32}, "int32_t": {4, 4, reflect.Int32},
	"uint32_t": {4, 4, reflect.Uint32}, "float": {4, 4, reflect.Float32},
	"long": {8, 8, reflect.Int64}, "ulong": {8, 8, reflect.Uint64},
	"int64_t": {8, 8, reflect.Int64}, "uint64_t": {8, 8, reflect.Uint64},
}

// mslLayout returns a type's size and alignment; vectors (float4, uint2,
// half3...) are their element's times 2, 4, or 4 for 3.
func mslLayout(typ string) (size, align int, kind reflect.Kind, ok bool) {
	if s, ok := mslScalars[typ]; ok {
		return s.size, s.align, s.kind, true
	}
	for _, n := range []int{2, 3, 4} {
		if base, found := strings.CutSuffix(typ, fmt.Sprint(n)); found {
			if s, ok := mslScalars[base]; ok {
				lanes := n
				if n == 3 {
					lanes = 4
				}
				return s.size * lanes, s.size * lanes, reflect.Invalid, true
			}
		}
	}
	return 0, 0, reflect.Invalid, false
}

// argStructs parses the argument structs of the shaders.
func argStructs(t *testing.T, srcs []msl.Source) map[string]msl.Struct {
	t.Helper()
	all, err := msl.Structs(srcs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]msl.Struct{}
	for _, s := range all {
		if strings.HasSuffix(s.Name, "_args") {
			if prev, dup := out[s.Name]; dup {
				t.Errorf("struct %s at %s:%d and %s:%d", s.Name, prev.File, prev.Line, s.File, s.Line)
			}
			out[s.Name] = s
		}
	}
	return out
}

// compareArgs lists how Go type g differs from MSL struct s: names (the
// msl tag), types and offsets, field by field, and the size.
func compareArgs(s msl.Struct, g reflect.Type) []string {
	var diffs []string
	at := func(f msl.Field) string { return fmt.Sprintf("%s:%d", s.File, f.Line) }
	off, maxAlign := 0, 1
	for i := 0; i < max(len(s.Fields), g.NumField()); i++ {
		if i >= len(s.Fields) {
			diffs = append(diffs, fmt.Sprintf("Go field %s has no MSL field", g.Field(i).Name))
			continue
		}
		f := s.Fields[i]
		size, align, kind, ok := mslLayout(f.Type)
		if !ok || f.Len != "" {
			diffs = append(diffs, fmt.Sprintf("%s: field %s: %s is not a scalar type", at(f), f.Name, f.Type))
			continue
		}
		off = (off + align - 1) / align * align
		maxAlign = max(maxAlign, align)
		if i >= g.NumField() {
			diffs = append(diffs, fmt.Sprintf("%s: field %s (%s at offset %d) has no Go field", at(f), f.Name, f.Type, off))
			off += size
			continue
		}
		gf := g.Field(i)
		switch tag := gf.Tag.Get("msl"); {
		case tag != f.Name:
			diffs = append(diffs, fmt.Sprintf("%s: field %d is %s, Go's is %s `msl:%q`", at(f), i, f.Name, gf.Name, tag))
		case kind == reflect.Invalid || gf.Type.Kind() != kind || int(gf.Type.Size()) != size:
			diffs = append(diffs, fmt.Sprintf("%s: field %s is %s (%d bytes), Go's %s is %s", at(f), f.Name, f.Type, size, gf.Name, gf.Type))
		case int(gf.Offset) != off:
			diffs = append(diffs, fmt.Sprintf("%s: field %s at offset %d, Go's %s at %d", at(f), f.Name, off, gf.Name, gf.Offset))
		}
		off += size
	}
	size := (off + maxAlign - 1) / maxAlign * maxAlign
	if int(g.Size()) != size {
		diffs = append(diffs, fmt.Sprintf("%s:%d: struct %s is %d bytes, Go's %s %d", s.File, s.Line, s.Name, size, g.Name(), g.Size()))
	}
	return diffs
}

// goArgTypes are the struct types of this package whose names end in Args.
func goArgTypes(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && strings.HasSuffix(ts.Name.Name, "Args") {
				if _, isStruct := ts.Type.(*ast.StructType); isStruct {
					names = append(names, ts.Name.Name)
				}
			}
			return true
		})
	}
	sort.Strings(names)
	return names
}

// TestArgStructs holds each kernel's argument struct in the .metal sources
// and the Go type the encoder packs it with to one layout, as ggml-metal
// holds its kernels and host code to ggml-metal-impl.h: the same fields in
// the same order (the Go field's msl tag names the MSL field), of the same
// size and kind, at the same offsets; and every *_args struct has its Go
// type and every *Args type of this package its struct.
func TestArgStructs(t *testing.T) {
	srcs, err := shaders.Sources()
	if err != nil {
		t.Fatal(err)
	}
	structs := argStructs(t, srcs)
	for name, s := range structs {
		g, ok := argTypes[name]
		if !ok {
			t.Errorf("%s:%d: struct %s has no Go type in argTypes", s.File, s.Line, name)
			continue
		}
		for _, d := range compareArgs(s, g) {
			t.Errorf("%s / %s: %s", name, g.Name(), d)
		}
	}
	var mapped []string
	for name, g := range argTypes {
		if _, ok := structs[name]; !ok {
			t.Errorf("Go type %s: no struct %s in the .metal sources", g.Name(), name)
		}
		mapped = append(mapped, g.Name())
	}
	sort.Strings(mapped)
	if got := goArgTypes(t); !slices.Equal(got, mapped) {
		t.Errorf("argument types of package encoder %v, argTypes maps %v", got, mapped)
	}
}

// TestArgBytes: the packed bytes put each field at its offset,
// little-endian, and the padding before a ulong is zero.
func TestArgBytes(t *testing.T) {
	b := AttnArgs{Heads: 0x01020304, QScale: 1, ScoreStride: 7, RingRows: 9, Ring: 0x1122334455667788}.Bytes()
	want := make([]byte, 72)
	copy(want[0:], []byte{4, 3, 2, 1})
	copy(want[40:], []byte{0, 0, 0x80, 0x3f})
	want[48] = 7
	want[56] = 9
	copy(want[64:], []byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11})
	if !slices.Equal(b, want) {
		t.Errorf("AttnArgs bytes\n got %x\nwant %x", b, want)
	}
	for name, g := range argTypes {
		if n := len(argBytes(reflect.Zero(g).Interface())); n != int(g.Size()) {
			t.Errorf("%s: %d bytes, want %d", name, n, g.Size())
		}
	}
}
