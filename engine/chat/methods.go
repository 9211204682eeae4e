package chat

import (
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// gonja's MethodSet can be read but not extended, so the chat method sets are rebuilt from the
// builtin names (as of gonja v2.9.1) plus this package's additions and fixes.
var (
	builtinStrMethods = []string{"capitalize", "capwords", "casefold", "center", "count", "encode",
		"endswith", "expandtabs", "find", "format", "format_map", "isalnum", "isalpha", "isascii",
		"isdecimal", "isdigit", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
		"join", "ljust", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "replace",
		"rfind", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith",
		"strip", "swapcase", "title", "upper", "zfill"}
	builtinDictMethods = []string{"clear", "copy", "get", "items", "keys", "pop", "setdefault",
		"update", "values"}
	builtinListMethods  = []string{"append", "copy", "reverse"}
	builtinIntMethods   = []string{"as_integer_ratio", "bit_count", "bit_length", "is_integer"}
	builtinFloatMethods = []string{"as_integer_ratio", "hex", "is_integer"}
	builtinBoolMethods  = []string{"as_integer_ratio", "bit_count", "bit_length", "int", "string"}
)

func copyMethods[I any](set *exec.MethodSet[I], names []string, extra map[string]exec.Method[I]) *exec.MethodSet[I] {
	m := map[string]exec.Method[I]{}
	for _, name := range names {
		if fn, ok := set.Get(name); ok {
			m[name] = fn
		}
	}
	for name, fn := range extra {
		m[name] = fn
	}
	return exec.NewMethodSet(m)
}

func chatMethods() exec.Methods {
	all := builtins.Methods
	return exec.Methods{
		Bool:  copyMethods(all.Bool, builtinBoolMethods, nil),
		Int:   copyMethods(all.Int, builtinIntMethods, nil),
		Float: copyMethods(all.Float, builtinFloatMethods, nil),
		Str:   copyMethods(all.Str, builtinStrMethods, extraStrMethods()),
		Dict:  copyMethods(all.Dict, builtinDictMethods, extraDictMethods()),
		List:  copyMethods(all.List, builtinListMethods, nil),
	}
}
