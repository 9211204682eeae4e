package chat

import (
	"math"
	"testing"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Expected strings are Python 3.11 json.dumps output.
func TestPyJSONFloats(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{1.0, "1.0"}, {0.1, "0.1"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
		{123456789.123, "123456789.123"}, {1e-4, "0.0001"}, {1e-5, "1e-05"}, {math.Copysign(0, -1), "-0.0"},
		{2.5e-300, "2.5e-300"}, {math.MaxFloat64, "1.7976931348623157e+308"}, {5e-324, "5e-324"},
		{100, "100.0"}, {math.NaN(), "NaN"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"},
	}
	for _, c := range cases {
		if got := pyFloatJSON(c.f, false); got != c.want {
			t.Errorf("pyFloatJSON(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func orderedDict(kv ...any) *exec.Dict {
	d := exec.NewDict()
	for i := 0; i+1 < len(kv); i += 2 {
		d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(kv[i]), Value: exec.AsValue(kv[i+1])})
	}
	return d
}

func TestPyJSON(t *testing.T) {
	ind2, tab := "  ", "\t"
	nested := orderedDict("a", []any{1, orderedDict("b", nil)}, "c", orderedDict())
	cases := []struct {
		name string
		v    any
		opt  pyJSONOptions
		want string
	}{
		{"ascii", orderedDict("a", "é\U0001F600\x7f\x00\u2028"), pyJSONOptions{itemSep: ", ", keySep: ": ", ensureASCII: true},
			`{"a": "\u00e9\ud83d\ude00\u007f\u0000\u2028"}`},
		{"utf8", orderedDict("a", "é\U0001F600\x7f\x00\u2028"), defaultPyJSONOptions(),
			"{\"a\": \"é\U0001F600\x7f\\u0000\u2028\"}"},
		{"indent2", nested, pyJSONOptions{indent: &ind2, itemSep: ",", keySep: ": "},
			"{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": {}\n}"},
		{"indentTab", orderedDict("a", []any{1}), pyJSONOptions{indent: &tab, itemSep: ",", keySep: ": "},
			"{\n\t\"a\": [\n\t\t1\n\t]\n}"},
		{"keys", orderedDict(1, "x", nil, "z", 2.5, "w", true, "t"), defaultPyJSONOptions(),
			`{"1": "x", "null": "z", "2.5": "w", "true": "t"}`},
		{"order", orderedDict("z", 1, "a", 2), defaultPyJSONOptions(), `{"z": 1, "a": 2}`},
		{"sorted", orderedDict("z", 1, "a", 2), pyJSONOptions{itemSep: ",", keySep: ":", sortKeys: true}, `{"a":2,"z":1}`},
		{"gomap", map[string]any{"b": []int{1, 2}, "a": true}, defaultPyJSONOptions(), `{"a": true, "b": [1, 2]}`},
		{"escapes", "q\"\\\n\r\t\b\f\x01/<>&'", defaultPyJSONOptions(), `"q\"\\\n\r\t\b\f\u0001/<>&'"`},
		{"values", exec.ValuesList{exec.AsValue(1), exec.AsValue(nil), exec.AsValue(float32(0.1))}, defaultPyJSONOptions(), `[1, null, 0.1]`},
	}
	for _, c := range cases {
		got, err := pyJSON(c.v, c.opt)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestPyJSONErrors(t *testing.T) {
	if _, err := pyJSON(struct{}{}, defaultPyJSONOptions()); err == nil {
		t.Error("struct: want not serializable error")
	}
	deep := any(nil)
	for range maxJSONDepth + 2 {
		deep = []any{deep}
	}
	if _, err := pyJSON(deep, defaultPyJSONOptions()); err == nil {
		t.Error("deep nesting: want error")
	}
}
