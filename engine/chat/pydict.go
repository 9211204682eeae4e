package chat

import (
	"fmt"
	"sort"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Dict access that keeps Python's insertion order. gonja hands dict methods a converted Go map
// (order lost, nested dicts flattened to maps) and its items filter ignores template-literal
// dicts, so these work from the original value instead.

type dictEntry struct {
	key, val any
}

// dictEntries lists a dict's entries: in insertion order for template dicts, by sorted key for
// Go maps (which have no order).
func dictEntries(v *exec.Value) ([]dictEntry, bool) {
	if v == nil {
		return nil, false
	}
	switch d := v.Interface().(type) {
	case *exec.Dict:
		return pairsEntries(d.Pairs), true
	case exec.Dict:
		return pairsEntries(d.Pairs), true
	case map[string]any:
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]dictEntry, len(keys))
		for i, k := range keys {
			out[i] = dictEntry{k, d[k]}
		}
		return out, true
	}
	if !v.IsDict() {
		return nil, false
	}
	var out []dictEntry
	for _, k := range v.Keys() {
		val, _ := v.GetItem(k.Interface())
		out = append(out, dictEntry{unwrap(k), unwrap(val)})
	}
	return out, true
}

func pairsEntries(pairs []*exec.Pair) []dictEntry {
	out := make([]dictEntry, len(pairs))
	for i, p := range pairs {
		out[i] = dictEntry{unwrap(p.Key), unwrap(p.Value)}
	}
	return out
}

// unwrap returns the Go value inside a template value. A *exec.Value must not be returned from
// a method as is: it implements error, so gonja would take it for a failure.
func unwrap(v any) any {
	if x, ok := v.(*exec.Value); ok {
		if x == nil {
			return nil
		}
		return x.Interface()
	}
	return v
}

func dictListMethod(name string, pick func(e dictEntry) any) exec.Method[map[string]any] {
	return func(_ map[string]any, self *exec.Value, a *exec.VarArgs) (any, error) {
		if len(a.Args)+len(a.KwArgs) != 0 {
			return nil, fmt.Errorf("%s() takes no arguments", name)
		}
		entries, _ := dictEntries(self)
		out := make([]any, len(entries))
		for i, e := range entries {
			out[i] = pick(e)
		}
		return out, nil
	}
}

func dictGet(_ map[string]any, self *exec.Value, a *exec.VarArgs) (any, error) {
	args, err := pyArgs("get", a, "key", "default")
	if err != nil {
		return nil, err
	}
	if args[0] == nil {
		return nil, fmt.Errorf("get() missing required argument 'key'")
	}
	entries, _ := dictEntries(self)
	for _, e := range entries {
		if exec.ToValue(e.key).EqualValueTo(args[0]) {
			return e.val, nil
		}
	}
	if args[1] != nil {
		return unwrap(args[1]), nil
	}
	return nil, nil
}

func extraDictMethods() map[string]exec.Method[map[string]any] {
	return map[string]exec.Method[map[string]any]{
		"items":  dictListMethod("items", func(e dictEntry) any { return []any{e.key, e.val} }),
		"keys":   dictListMethod("keys", func(e dictEntry) any { return e.key }),
		"values": dictListMethod("values", func(e dictEntry) any { return e.val }),
		"get":    dictGet,
	}
}

// filterItems is jinja2's items filter: (key, value) pairs of a mapping, empty for undefined.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args)+len(params.KwArgs) != 0 {
		return exec.AsValue(fmt.Errorf("items filter takes no arguments"))
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	entries, ok := dictEntries(in)
	if !ok {
		return exec.AsValue(fmt.Errorf("items filter: %s is not a mapping", in.String()))
	}
	out := make([]any, len(entries))
	for i, e := range entries {
		out[i] = []any{e.key, e.val}
	}
	return exec.AsValue(out)
}
