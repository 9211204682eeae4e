package chat

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// gonja parses jinja2's conditional expression "A if C else B" only as a whole {{ }} output or
// the value of a {% set %}; inside parentheses it fails ("Unbalanced parenthesis"), and
// gpt-oss's template writes (tool_call.content_type if tool_call.content_type is defined else
// "json"). A parenthesized group whose own level holds "if" becomes a filter call:
//
//	(A if C else B)  →  ((C)|pyifelse(A, B))
//	(A if C)         →  ((C)|pyifelse(A))        (undefined when C is false, as in jinja2)
//
// B may itself be conditional (right-associative, as in Python). Both branches are evaluated,
// which only matters for a branch with side effects: a group whose branches call
// raise_exception is left alone. Groups with a comma on their own level (tuples, calls with
// several arguments) are left alone too.

// rewriteInlineIf rewrites every parenthesized conditional inside one tag's text, innermost
// first.
func rewriteInlineIf(s string) string {
	if !strings.Contains(s, "if") {
		return s
	}
	for range maxBracketDepth {
		out, ok := rewriteFirstInlineIf(s)
		if !ok {
			return s
		}
		s = out
	}
	return s
}

// rewriteFirstInlineIf rewrites the first parenthesized conditional to close (an innermost
// one) and reports whether there was one.
func rewriteFirstInlineIf(s string) (string, bool) {
	var open []int
	for i := 0; i < len(s); {
		switch s[i] {
		case '\'', '"':
			j := skipString(s, i)
			if j < 0 {
				return s, false
			}
			i = j
			continue
		case '(':
			open = append(open, i)
		case ')':
			if len(open) == 0 {
				return s, false
			}
			start := open[len(open)-1]
			open = open[:len(open)-1]
			inner := s[start+1 : i]
			if expr, ok := conditionalExpr(inner); ok {
				return s[:start] + "(" + expr + ")" + s[i+1:], true
			}
		}
		i++
	}
	return s, false
}

// conditionalExpr rewrites the text of one group when its own level is "A if C [else B]".
func conditionalExpr(inner string) (string, bool) {
	ifAt := topLevelWord(inner, "if", 0)
	if ifAt < 0 || hasTopLevelComma(inner) || strings.Contains(inner, "raise_exception") {
		return "", false
	}
	a := strings.TrimSpace(inner[:ifAt])
	rest := inner[ifAt+2:]
	c, b := rest, ""
	if elseAt := topLevelWord(rest, "else", 0); elseAt >= 0 {
		c, b = rest[:elseAt], rest[elseAt+4:]
	}
	c = strings.TrimSpace(c)
	if a == "" || c == "" {
		return "", false
	}
	args := a
	if b = strings.TrimSpace(b); b != "" {
		if nested, ok := conditionalExpr(b); ok {
			b = "(" + nested + ")"
		}
		args += ", " + b
	}
	return "(" + c + ")|pyifelse(" + args + ")", true
}

// topLevelWord is the index of word w at the bracket level s starts on, outside string
// literals, from index from on; -1 if none.
func topLevelWord(s, w string, from int) int {
	depth := 0
	for i := from; i < len(s); {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			j := skipString(s, i)
			if j < 0 {
				return -1
			}
			i = j
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth == 0 && strings.HasPrefix(s[i:], w) &&
			(i == 0 || !isIdentByte(s[i-1], false) && s[i-1] != '.') &&
			(i+len(w) == len(s) || !isIdentByte(s[i+len(w)], false)):
			return i
		case isIdentByte(c, false):
			// Skip the rest of an identifier so that "notify" holds no "if".
			for i < len(s) && isIdentByte(s[i], false) {
				i++
			}
			continue
		}
		i++
	}
	return -1
}

// filterPyIfElse is the rewritten conditional: its input is the condition, its arguments the
// two branches (the second absent: undefined).
func filterPyIfElse(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsTrue() {
		if len(params.Args) > 0 {
			return params.Args[0]
		}
		return exec.AsValue(nil)
	}
	if len(params.Args) > 1 {
		return params.Args[1]
	}
	return exec.AsValue(nil)
}
