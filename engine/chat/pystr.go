package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python string methods that gonja v2.9.1 gets wrong: its optional arguments default to the rune
// ' ' (an int), so s.lstrip(), s.split(), s.replace(a, b), s.center(n)... fail with
// "32 is not a string". These follow Python's str semantics.

// pyIsSpace is str.isspace for one character (Go's unicode.IsSpace lacks U+001C..U+001F).
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip strips chars from the chosen ends; chars nil means whitespace.
func pyStrip(s string, chars *string, left, right bool) string {
	in := pyIsSpace
	if chars != nil {
		set := *chars
		in = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, in)
	}
	if right {
		s = strings.TrimRightFunc(s, in)
	}
	return s
}

// pySplit is str.split / str.rsplit. sep nil splits on runs of whitespace and drops empty ends.
func pySplit(s string, sep *string, maxsplit int, fromRight bool) ([]any, error) {
	var parts []string
	switch {
	case sep != nil && *sep == "":
		return nil, fmt.Errorf("empty separator")
	case sep != nil:
		if maxsplit < 0 {
			parts = strings.Split(s, *sep)
		} else if !fromRight {
			parts = strings.SplitN(s, *sep, maxsplit+1)
		} else {
			parts = rsplitN(s, *sep, maxsplit)
		}
	default:
		fields := strings.FieldsFunc(s, pyIsSpace)
		if maxsplit < 0 || len(fields) <= maxsplit {
			parts = fields
		} else if !fromRight {
			// keep the remainder as written after the maxsplit-th field
			rest := s
			for range maxsplit {
				rest = strings.TrimLeftFunc(rest, pyIsSpace)
				end := strings.IndexFunc(rest, pyIsSpace)
				parts = append(parts, rest[:end])
				rest = rest[end:]
			}
			parts = append(parts, strings.TrimLeftFunc(rest, pyIsSpace))
		} else {
			rest := s
			var tail []string
			for range maxsplit {
				rest = strings.TrimRightFunc(rest, pyIsSpace)
				start := strings.LastIndexFunc(rest, pyIsSpace)
				_, size := utf8.DecodeRuneInString(rest[start:])
				tail = append(tail, rest[start+size:])
				rest = rest[:start]
			}
			parts = append(parts, strings.TrimRightFunc(rest, pyIsSpace))
			for i := len(tail) - 1; i >= 0; i-- {
				parts = append(parts, tail[i])
			}
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func rsplitN(s, sep string, maxsplit int) []string {
	var tail []string
	for range maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		tail = append(tail, s[i+len(sep):])
		s = s[:i]
	}
	parts := []string{s}
	for i := len(tail) - 1; i >= 0; i-- {
		parts = append(parts, tail[i])
	}
	return parts
}

// pyArgs reads Python-style arguments (positional, then by keyword) into values; nil for absent.
func pyArgs(method string, a *exec.VarArgs, names ...string) ([]*exec.Value, error) {
	if len(a.Args) > len(names) {
		return nil, fmt.Errorf("%s() takes at most %d arguments (%d given)", method, len(names), len(a.Args))
	}
	out := make([]*exec.Value, len(names))
	copy(out, a.Args)
	for k, v := range a.KwArgs {
		found := false
		for i, n := range names {
			if n == k {
				if out[i] != nil {
					return nil, fmt.Errorf("%s() got multiple values for argument %q", method, k)
				}
				out[i], found = v, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument %q", method, k)
		}
	}
	return out, nil
}

// optString is an optional str-or-None argument.
func optString(method string, v *exec.Value) (*string, error) {
	if v == nil || v.IsNil() {
		return nil, nil
	}
	if !v.IsString() {
		return nil, fmt.Errorf("%s() argument must be str or None, not %s", method, v.String())
	}
	s := v.String()
	return &s, nil
}

func optInt(method string, v *exec.Value, dflt int) (int, error) {
	if v == nil {
		return dflt, nil
	}
	if !v.IsInteger() {
		return 0, fmt.Errorf("%s() argument must be an integer, not %s", method, v.String())
	}
	return v.Integer(), nil
}

func stripMethod(name string, left, right bool) exec.Method[string] {
	return func(self string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		args, err := pyArgs(name, a, "chars")
		if err != nil {
			return nil, err
		}
		chars, err := optString(name, args[0])
		if err != nil {
			return nil, err
		}
		return pyStrip(self, chars, left, right), nil
	}
}

func splitMethod(name string, fromRight bool) exec.Method[string] {
	return func(self string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		args, err := pyArgs(name, a, "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		sep, err := optString(name, args[0])
		if err != nil {
			return nil, err
		}
		maxsplit, err := optInt(name, args[1], -1)
		if err != nil {
			return nil, err
		}
		return pySplit(self, sep, maxsplit, fromRight)
	}
}

func replaceMethod(self string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	args, err := pyArgs("replace", a, "old", "new", "count")
	if err != nil {
		return nil, err
	}
	if args[0] == nil || args[1] == nil || !args[0].IsString() || !args[1].IsString() {
		return nil, fmt.Errorf("replace() takes two string arguments")
	}
	count, err := optInt("replace", args[2], -1)
	if err != nil {
		return nil, err
	}
	return strings.Replace(self, args[0].String(), args[1].String(), count), nil
}

// padMethod is center/ljust/rjust(width[, fillchar]).
func padMethod(name string) exec.Method[string] {
	return func(self string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		args, err := pyArgs(name, a, "width", "fillchar")
		if err != nil {
			return nil, err
		}
		if args[0] == nil {
			return nil, fmt.Errorf("%s() missing required argument 'width'", name)
		}
		width, err := optInt(name, args[0], 0)
		if err != nil {
			return nil, err
		}
		fill := " "
		if args[1] != nil {
			fill = args[1].String()
			if utf8.RuneCountInString(fill) != 1 {
				return nil, fmt.Errorf("%s() fillchar must be exactly one character", name)
			}
		}
		n := utf8.RuneCountInString(self)
		if width <= n {
			return self, nil
		}
		// bounded by the output limit long before it matters; still refuse absurd widths
		if width > maxOutputBytes {
			return nil, fmt.Errorf("%s() width %d too large", name, width)
		}
		pad := width - n
		var left int
		switch name {
		case "ljust":
			left = 0
		case "rjust":
			left = pad
		default: // CPython's center puts the odd space on the left when width is odd
			left = pad/2 + (pad & width & 1)
		}
		return strings.Repeat(fill, left) + self + strings.Repeat(fill, pad-left), nil
	}
}

// zfillMethod is str.zfill(width): zeros on the left, after a leading sign. gonja's panics on
// the empty string and allocates any width it is given.
func zfillMethod(self string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	args, err := pyArgs("zfill", a, "width")
	if err != nil {
		return nil, err
	}
	if args[0] == nil {
		return nil, fmt.Errorf("zfill() missing required argument 'width'")
	}
	width, err := optInt("zfill", args[0], 0)
	if err != nil {
		return nil, err
	}
	n := utf8.RuneCountInString(self)
	if width <= n {
		return self, nil
	}
	if width > maxOutputBytes {
		return nil, fmt.Errorf("zfill() width %d too large", width)
	}
	sign := ""
	if self != "" && (self[0] == '+' || self[0] == '-') {
		sign, self = self[:1], self[1:]
	}
	return sign + strings.Repeat("0", width-n) + self, nil
}

func extraStrMethods() map[string]exec.Method[string] {
	return map[string]exec.Method[string]{
		"strip":   stripMethod("strip", true, true),
		"lstrip":  stripMethod("lstrip", true, false),
		"rstrip":  stripMethod("rstrip", false, true),
		"split":   splitMethod("split", false),
		"rsplit":  splitMethod("rsplit", true),
		"replace": replaceMethod,
		"center":  padMethod("center"),
		"ljust":   padMethod("ljust"),
		"rjust":   padMethod("rjust"),
		"zfill":   zfillMethod,
	}
}
