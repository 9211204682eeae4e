package gguf

import "math"

// Arch is general.architecture ("" when absent).
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	s, ok := f.KV[key].Data.(string)
	return s, ok && f.KV[key].Type == String
}

// Uint returns any integer value that is non-negative.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.KV[key]
	if !ok {
		return 0, false
	}
	if u, ok := asUint(v.Data); ok {
		return u, true
	}
	if i, ok := asInt(v.Data); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int returns any integer value that fits in an int64.
func (f *File) Int(key string) (int64, bool) {
	v, ok := f.KV[key]
	if !ok {
		return 0, false
	}
	if i, ok := asInt(v.Data); ok {
		return i, true
	}
	if u, ok := asUint(v.Data); ok && u <= math.MaxInt64 {
		return int64(u), true
	}
	return 0, false
}

// Float returns any numeric value as a float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.KV[key]
	if !ok {
		return 0, false
	}
	return asFloat(v.Data)
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	b, ok := f.KV[key].Data.(bool)
	return b, ok
}

// Strings returns a string array. The slice is shared: do not modify it.
func (f *File) Strings(key string) ([]string, bool) {
	s, ok := f.KV[key].Data.([]string)
	return s, ok
}

// Float32s returns a numeric array as float32s; a float32 array is returned
// as is (shared: do not modify it), other numeric arrays are converted.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, ok := f.KV[key]
	if !ok || v.Type != Array || v.Data == nil {
		return nil, false
	}
	if s, ok := v.Data.([]float32); ok {
		return s, true
	}
	n := sliceLen(v.Data)
	if n < 0 {
		return nil, false
	}
	out := make([]float32, n)
	for i := range out {
		x, ok := asFloat(index(v.Data, i))
		if !ok {
			return nil, false
		}
		out[i] = float32(x)
	}
	return out, true
}

// Int32s returns an integer array as int32s; an int32 array is returned as
// is (shared: do not modify it), other integer arrays are converted when
// every element fits.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, ok := f.KV[key]
	if !ok || v.Type != Array || v.Data == nil {
		return nil, false
	}
	if s, ok := v.Data.([]int32); ok {
		return s, true
	}
	n := sliceLen(v.Data)
	if n < 0 {
		return nil, false
	}
	out := make([]int32, n)
	for i := range out {
		e := index(v.Data, i)
		if x, ok := asInt(e); ok && x >= math.MinInt32 && x <= math.MaxInt32 {
			out[i] = int32(x)
		} else if u, ok := asUint(e); ok && u <= math.MaxInt32 {
			out[i] = int32(u)
		} else {
			return nil, false
		}
	}
	return out, true
}

// ArrayLen is the element count of an array, also when its data was skipped.
func (f *File) ArrayLen(key string) (int, bool) {
	v, ok := f.KV[key]
	if !ok || v.Type != Array {
		return 0, false
	}
	return v.Len, true
}

func asUint(x any) (uint64, bool) {
	switch v := x.(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	}
	return 0, false
}

func asInt(x any) (int64, bool) {
	switch v := x.(type) {
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

func asFloat(x any) (float64, bool) {
	switch v := x.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if u, ok := asUint(x); ok {
		return float64(u), true
	}
	if i, ok := asInt(x); ok {
		return float64(i), true
	}
	return 0, false
}

// index returns element i of a numeric slice made by makeSlice.
func index(s any, i int) any {
	switch d := s.(type) {
	case []uint8:
		return d[i]
	case []int8:
		return d[i]
	case []uint16:
		return d[i]
	case []int16:
		return d[i]
	case []uint32:
		return d[i]
	case []int32:
		return d[i]
	case []float32:
		return d[i]
	case []uint64:
		return d[i]
	case []int64:
		return d[i]
	case []float64:
		return d[i]
	}
	return nil
}

// sliceLen is the length of any slice Value.Data can hold (-1 otherwise).
func sliceLen(s any) int {
	switch d := s.(type) {
	case []uint8:
		return len(d)
	case []int8:
		return len(d)
	case []uint16:
		return len(d)
	case []int16:
		return len(d)
	case []uint32:
		return len(d)
	case []int32:
		return len(d)
	case []float32:
		return len(d)
	case []uint64:
		return len(d)
	case []int64:
		return len(d)
	case []float64:
		return len(d)
	case []bool:
		return len(d)
	case []string:
		return len(d)
	case []Value:
		return len(d)
	}
	return -1
}

// Bools returns a bool array.
func (f *File) Bools(key string) ([]bool, bool) {
	v, ok := f.KV[key]
	if !ok || v.Type != Array || v.Elem != Bool {
		return nil, false
	}
	s, ok := v.Data.([]bool)
	return s, ok
}
