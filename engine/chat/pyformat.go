package chat

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Python's printf-style string formatting ('%s: %d' % (a, b)). gonja evaluates "%" as integer
// modulo on every operand, so '%s' % x silently renders "0". The preprocessor rewrites the form
// templates use, a string literal on the left, into the filter pyformat:
//
//	'%s-%d' % ('a', 3)   →  ('%s-%d'|pyformat('a', 3))
//	'<%s>' % m.role|upper →  ('<%s>'|pyformat(m.role|upper))
//
// "%" binds looser than filters, attribute access, calls and subscripts and tighter than
// + - ~, which is exactly the operand taken here. A "%" with anything else on its left stays
// numeric modulo.

// rewritePercentExpr rewrites "LITERAL % OPERAND" inside one tag's text.
func rewritePercentExpr(s string) string {
	var out strings.Builder
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\'' && c != '"' {
			i++
			continue
		}
		litEnd := skipString(s, i)
		if litEnd < 0 {
			break
		}
		j := skipSpaces(s, litEnd)
		// "%" that is neither the end of a {% %} tag nor "%=" style
		if j >= len(s) || s[j] != '%' || (j+1 < len(s) && s[j+1] == '}') {
			i = litEnd
			continue
		}
		opStart := skipSpaces(s, j+1)
		args, opEnd, ok := parsePercentOperand(s, opStart)
		if !ok {
			i = litEnd
			continue
		}
		out.WriteString(s[last:i])
		out.WriteString("(" + s[i:litEnd] + "|pyformat(" + args + "))")
		last, i = opEnd, opEnd
	}
	out.WriteString(s[last:])
	return out.String()
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

// parsePercentOperand reads the right operand of "%": a parenthesized tuple (its items become
// the filter arguments) or a primary with its trailers and filters. It returns the argument text.
func parsePercentOperand(s string, i int) (string, int, bool) {
	if i >= len(s) {
		return "", 0, false
	}
	if s[i] == '(' {
		end := skipGroup(s, i)
		if end < 0 {
			return "", 0, false
		}
		inner := strings.TrimSpace(s[i+1 : end-1])
		if hasTopLevelComma(inner) {
			inner = strings.TrimSuffix(inner, ",")
		}
		return inner, end, true
	}
	j := i
	switch c := s[j]; {
	case c == '\'' || c == '"':
		j = skipString(s, j)
	case c == '[' || c == '{':
		j = skipGroup(s, j)
	case isIdentByte(c, true):
		for j < len(s) && isIdentByte(s[j], false) {
			j++
		}
	case c >= '0' && c <= '9':
		for j < len(s) && (s[j] == '.' || isIdentByte(s[j], false)) {
			j++
		}
	default:
		return "", 0, false
	}
	if j < 0 {
		return "", 0, false
	}
	// trailers: .name, [..], (..), then filters |name(..)
	for {
		k := j
		switch {
		case k < len(s) && s[k] == '.':
			k++
			for k < len(s) && isIdentByte(s[k], false) {
				k++
			}
		case k < len(s) && (s[k] == '[' || s[k] == '('):
			k = skipGroup(s, k)
			if k < 0 {
				return "", 0, false
			}
		default:
			k = skipSpaces(s, j)
			if k >= len(s) || s[k] != '|' {
				return s[i:j], j, true
			}
			k = skipSpaces(s, k+1)
			if k >= len(s) || !isIdentByte(s[k], true) {
				return s[i:j], j, true
			}
			for k < len(s) && isIdentByte(s[k], false) {
				k++
			}
			if k < len(s) && s[k] == '(' {
				k = skipGroup(s, k)
				if k < 0 {
					return "", 0, false
				}
			}
		}
		j = k
	}
}

// hasTopLevelComma reports a comma at the level s starts on, outside string literals.
func hasTopLevelComma(s string) bool {
	depth := 0
	for j := 0; j < len(s); {
		switch c := s[j]; c {
		case '\'', '"':
			k := skipString(s, j)
			if k < 0 {
				return false
			}
			j = k
			continue
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				return true
			}
		}
		j++
	}
	return false
}

// filterPyFormat is str % args with Python's conversion rules for s r d i u f F e E g G x X o c.
func filterPyFormat(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	out, err := pyPercent(in.String(), params.Args)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(out)
}

func pyPercent(format string, args []*exec.Value) (string, error) {
	var b strings.Builder
	next := 0
	var mapping *exec.Value
	if len(args) == 1 && args[0].IsDict() {
		mapping = args[0]
	}
	usedMapping := false
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			b.WriteByte(format[i])
			continue
		}
		i++
		if i >= len(format) {
			return "", fmt.Errorf("%%-format: incomplete format")
		}
		var arg *exec.Value
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 || mapping == nil {
				return "", fmt.Errorf("%%-format: format requires a mapping")
			}
			v, ok := mapping.GetItem(format[i+1 : i+end])
			if !ok {
				return "", fmt.Errorf("%%-format: key %q not found", format[i+1:i+end])
			}
			arg, usedMapping = v, true
			i += end + 1
		}
		start := i
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			i++
		}
		for i < len(format) && (format[i] >= '0' && format[i] <= '9' || format[i] == '.') {
			i++
		}
		if i >= len(format) {
			return "", fmt.Errorf("%%-format: incomplete format")
		}
		spec, verb := format[start:i], format[i]
		if len(spec) > 8 {
			return "", fmt.Errorf("%%-format: spec %q too long", spec)
		}
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if arg == nil {
			if next >= len(args) {
				return "", fmt.Errorf("%%-format: not enough arguments for format string")
			}
			arg = args[next]
			next++
		}
		s, err := pyConvert(spec, verb, arg)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	if next < len(args) && !usedMapping && mapping == nil {
		return "", fmt.Errorf("%%-format: not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func pyConvert(spec string, verb byte, v *exec.Value) (string, error) {
	goSpec := "%" + spec
	switch verb {
	case 's':
		return fmt.Sprintf(goSpec+"s", v.String()), nil
	case 'r':
		if v.IsString() {
			return fmt.Sprintf(goSpec+"s", "'"+strings.ReplaceAll(v.String(), "'", `\'`)+"'"), nil
		}
		return fmt.Sprintf(goSpec+"s", v.String()), nil
	case 'd', 'i', 'u', 'x', 'X', 'o':
		if !v.IsNumber() && !v.IsBool() {
			return "", fmt.Errorf("%%-format: %%%c format: a real number is required, not %s", verb, v.String())
		}
		n := v.Integer()
		if v.IsFloat() {
			n = int(v.Float())
		}
		if v.IsBool() && v.Bool() {
			n = 1
		}
		gv := map[byte]string{'d': "d", 'i': "d", 'u': "d", 'x': "x", 'X': "X", 'o': "o"}[verb]
		if verb == 'o' && strings.Contains(spec, "#") && n >= 0 {
			// Python's alternate octal prefix is 0o, Go's is 0
			return "0o" + fmt.Sprintf(strings.ReplaceAll(goSpec, "#", "")+"o", n), nil
		}
		return fmt.Sprintf(goSpec+gv, n), nil
	case 'f', 'F', 'e', 'E', 'g', 'G':
		if !v.IsNumber() && !v.IsBool() {
			return "", fmt.Errorf("%%-format: must be real number, not %s", v.String())
		}
		if !strings.Contains(spec, ".") {
			goSpec += ".6" // Python's default precision; Go's would be shortest
		}
		return fmt.Sprintf(goSpec+string(verb), v.Float()), nil
	case 'c':
		if v.IsInteger() {
			return fmt.Sprintf(goSpec+"c", rune(v.Integer())), nil
		}
		if s := v.String(); v.IsString() && utf8.RuneCountInString(s) == 1 {
			return fmt.Sprintf(goSpec+"s", s), nil
		}
		return "", fmt.Errorf("%%-format: %%c requires int or char")
	}
	return "", fmt.Errorf("%%-format: unsupported format character %q", verb)
}
