package mtl

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"nibble/metal/device"
	"nibble/metal/msl"
)

// constValue is one function constant as Metal takes it
// (setConstantValue:type:atIndex:): its MTLDataType and its bytes.
type constValue struct {
	index int
	typ   int
	bytes []byte
}

// encodeConstants checks and encodes the values by device.EncodeConstants
// (the emulator's rules too) and gives each its MTLDataType, in the order
// of their indices.
func encodeConstants(decls []msl.Constant, k *msl.Kernel, name string, cs []device.Constant) ([]constValue, error) {
	enc, err := device.EncodeConstants(decls, k, name, cs)
	if err != nil {
		return nil, err
	}
	out := make([]constValue, len(enc))
	for i, c := range enc {
		out[i] = constValue{index: c.Decl.Index, typ: dataTypes[c.Decl.Type], bytes: c.Bytes}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out, nil
}

// dataTypes is the MTLDataType of each MSL type a function constant may
// have (the types device.EncodeConstants takes).
var dataTypes = map[string]int{
	"bool": dataTypeBool,
	"char": dataTypeChar, "int8_t": dataTypeChar,
	"uchar": dataTypeUChar, "uint8_t": dataTypeUChar,
	"short": dataTypeShort, "int16_t": dataTypeShort,
	"ushort": dataTypeUShort, "uint16_t": dataTypeUShort,
	"int": dataTypeInt, "int32_t": dataTypeInt,
	"uint": dataTypeUInt, "uint32_t": dataTypeUInt,
	"float": dataTypeFloat,
	"half":  dataTypeHalf,
}

// pipelineKey is the pipeline cache's key: the kernel and its constants.
func pipelineKey(name string, cs []constValue) string {
	var b strings.Builder
	b.WriteString(name)
	for _, c := range cs {
		b.WriteString("|")
		b.WriteString(strconv.Itoa(c.index))
		b.WriteString(":")
		b.WriteString(strconv.Itoa(c.typ))
		b.WriteString("=")
		for _, x := range c.bytes {
			fmt.Fprintf(&b, "%02x", x)
		}
	}
	return b.String()
}
