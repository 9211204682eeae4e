package chat

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// pyJSONOptions are the json.dumps arguments transformers' tojson filter forwards.
type pyJSONOptions struct {
	indent      *string // nil: single line
	itemSep     string
	keySep      string
	sortKeys    bool
	ensureASCII bool
}

func defaultPyJSONOptions() pyJSONOptions {
	return pyJSONOptions{itemSep: ", ", keySep: ": "}
}

// maxJSONDepth stops runaway nesting (Python raises RecursionError on cycles).
const maxJSONDepth = 256

// pyJSON formats v exactly as Python's json.dumps would with the given options.
func pyJSON(v any, opt pyJSONOptions) (string, error) {
	var b strings.Builder
	if err := writePyJSON(&b, v, opt, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

type jsonMember struct {
	key string
	val any
}

func writePyJSON(b *strings.Builder, v any, opt pyJSONOptions, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("tojson: nesting deeper than %d", maxJSONDepth)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
		return nil
	case *exec.Value:
		if x == nil || x.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writePyJSON(b, x.Interface(), opt, depth)
	case string:
		writePyString(b, x, opt.ensureASCII)
		return nil
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
		return nil
	case exec.ValuesList:
		items := make([]any, len(x))
		for i, it := range x {
			items[i] = it
		}
		return writePyArray(b, items, opt, depth)
	case []any:
		return writePyArray(b, x, opt, depth)
	case *exec.Dict:
		if x == nil {
			b.WriteString("null")
			return nil
		}
		return writePyDict(b, *x, opt, depth)
	case exec.Dict:
		return writePyDict(b, x, opt, depth)
	case map[string]any:
		members := make([]jsonMember, 0, len(x))
		for k, val := range x {
			members = append(members, jsonMember{k, val})
		}
		// A Go map has no insertion order; sorted is at least deterministic.
		sortMembers(members)
		return writePyObject(b, members, opt, depth)
	case error:
		return x
	}

	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writePyJSON(b, rv.Elem().Interface(), opt, depth)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(rv.Int(), 10))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b.WriteString(strconv.FormatUint(rv.Uint(), 10))
		return nil
	case reflect.Float32, reflect.Float64:
		b.WriteString(pyFloatJSON(rv.Float(), rv.Kind() == reflect.Float32))
		return nil
	case reflect.String:
		writePyString(b, rv.String(), opt.ensureASCII)
		return nil
	case reflect.Bool:
		return writePyJSON(b, rv.Bool(), opt, depth)
	case reflect.Slice, reflect.Array:
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return writePyArray(b, items, opt, depth)
	case reflect.Map:
		members := make([]jsonMember, 0, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k, err := pyJSONKey(iter.Key().Interface())
			if err != nil {
				return err
			}
			members = append(members, jsonMember{k, iter.Value().Interface()})
		}
		sortMembers(members)
		return writePyObject(b, members, opt, depth)
	}
	return fmt.Errorf("tojson: object of type %T is not JSON serializable", v)
}

func sortMembers(m []jsonMember) {
	sort.SliceStable(m, func(i, j int) bool { return m[i].key < m[j].key })
}

func writePyDict(b *strings.Builder, d exec.Dict, opt pyJSONOptions, depth int) error {
	members := make([]jsonMember, 0, len(d.Pairs))
	for _, p := range d.Pairs {
		var key any
		if p.Key != nil {
			key = p.Key.Interface()
		}
		k, err := pyJSONKey(key)
		if err != nil {
			return err
		}
		members = append(members, jsonMember{k, p.Value})
	}
	return writePyObject(b, members, opt, depth)
}

// pyJSONKey converts a dict key the way json.dumps does: str as is, numbers and bools and None
// as their JSON text.
func pyJSONKey(k any) (string, error) {
	if v, ok := k.(*exec.Value); ok {
		if v == nil || v.IsNil() {
			return "null", nil
		}
		k = v.Interface()
	}
	switch x := k.(type) {
	case nil:
		return "null", nil
	case string:
		return x, nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	rv := reflect.ValueOf(k)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		return pyFloatJSON(rv.Float(), rv.Kind() == reflect.Float32), nil
	case reflect.String:
		return rv.String(), nil
	}
	return "", fmt.Errorf("tojson: keys must be str, int, float, bool or None, not %T", k)
}

func writePyArray(b *strings.Builder, items []any, opt pyJSONOptions, depth int) error {
	if len(items) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteString(opt.itemSep)
		}
		writeIndent(b, opt, depth+1)
		if err := writePyJSON(b, it, opt, depth+1); err != nil {
			return err
		}
	}
	writeIndent(b, opt, depth)
	b.WriteByte(']')
	return nil
}

func writePyObject(b *strings.Builder, members []jsonMember, opt pyJSONOptions, depth int) error {
	if len(members) == 0 {
		b.WriteString("{}")
		return nil
	}
	if opt.sortKeys {
		sortMembers(members)
	}
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteString(opt.itemSep)
		}
		writeIndent(b, opt, depth+1)
		writePyString(b, m.key, opt.ensureASCII)
		b.WriteString(opt.keySep)
		if err := writePyJSON(b, m.val, opt, depth+1); err != nil {
			return err
		}
	}
	writeIndent(b, opt, depth)
	b.WriteByte('}')
	return nil
}

func writeIndent(b *strings.Builder, opt pyJSONOptions, level int) {
	if opt.indent == nil {
		return
	}
	b.WriteByte('\n')
	for range level {
		b.WriteString(*opt.indent)
	}
}

const hexDigits = "0123456789abcdef"

// writePyString quotes s like json.dumps: only ", \ and control characters are escaped, plus
// everything non-ASCII (as UTF-16 \u escapes) when ensureASCII is set.
func writePyString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 || (ensureASCII && c == 0x7f) {
					writeUEscape(b, rune(c))
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !ensureASCII:
			b.WriteString(s[i : i+size])
		case r >= 0x10000:
			r -= 0x10000
			writeUEscape(b, 0xd800+(r>>10))
			writeUEscape(b, 0xdc00+(r&0x3ff))
		default:
			writeUEscape(b, r)
		}
		i += size
	}
	b.WriteByte('"')
}

func writeUEscape(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[(r>>12)&0xf])
	b.WriteByte(hexDigits[(r>>8)&0xf])
	b.WriteByte(hexDigits[(r>>4)&0xf])
	b.WriteByte(hexDigits[r&0xf])
}

// pyFloatJSON is float.__repr__ as json.dumps uses it: shortest round-trip digits, ".0" on
// integral values, scientific notation below 1e-4 or from 1e16 up.
func pyFloatJSON(f float64, is32 bool) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyFloatRepr(f, is32)
}

func pyFloatRepr(f float64, is32 bool) string {
	bits := 64
	if is32 {
		bits = 32
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sci := strconv.FormatFloat(f, 'e', -1, bits) // e.g. "1.5e-07", "1e+20"
	ePos := strings.IndexByte(sci, 'e')
	exp, _ := strconv.Atoi(sci[ePos+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// filterToJSON is transformers' tojson(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	opt := defaultPyJSONOptions()
	arg := func(pos int, name string) *exec.Value {
		if v, ok := params.KwArgs[name]; ok {
			return v
		}
		if pos < len(params.Args) {
			return params.Args[pos]
		}
		return nil
	}
	if len(params.Args) > 4 {
		return exec.AsValue(fmt.Errorf("tojson takes at most 4 positional arguments, got %d", len(params.Args)))
	}
	for name := range params.KwArgs {
		switch name {
		case "ensure_ascii", "indent", "separators", "sort_keys":
		default:
			return exec.AsValue(fmt.Errorf("tojson got an unexpected keyword argument %q", name))
		}
	}
	if v := arg(0, "ensure_ascii"); v != nil {
		opt.ensureASCII = v.IsTrue()
	}
	if v := arg(1, "indent"); v != nil && !v.IsNil() {
		var ind string
		switch {
		case v.IsInteger():
			ind = strings.Repeat(" ", max(0, min(v.Integer(), 64)))
		case v.IsString():
			ind = v.String()
		default:
			return exec.AsValue(fmt.Errorf("tojson indent must be an int or a string, got %s", v.String()))
		}
		opt.indent = &ind
		opt.itemSep = "," // json.dumps drops the space after ',' when indenting
	}
	if v := arg(2, "separators"); v != nil && !v.IsNil() {
		if !v.IsList() || v.Len() != 2 {
			return exec.AsValue(fmt.Errorf("tojson separators must be a pair of strings, got %s", v.String()))
		}
		opt.itemSep = v.Index(0).String()
		opt.keySep = v.Index(1).String()
	}
	if v := arg(3, "sort_keys"); v != nil {
		opt.sortKeys = v.IsTrue()
	}
	out, err := pyJSON(in, opt)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(out)
}
