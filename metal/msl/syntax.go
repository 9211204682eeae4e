package msl

import (
	"fmt"
)

// File is one source split into tokens, with its brackets paired: what Parse
// walks for the kernels' metadata, and what an emitter (metal/internal/msltoc)
// walks again to rewrite the text by the tokens' byte ranges.
type File struct {
	Name   string
	Text   string
	Tokens []Token
	sc     *scanner
	pair   []int // see pairBrackets
}

// Scan splits a source into tokens.
func Scan(s Source) (*File, error) {
	sc := newScanner(s.Text)
	toks, err := sc.tokens()
	if err != nil {
		err.(*Error).File = s.Name
		return nil, err
	}
	f := &File{Name: s.Name, Text: s.Text, Tokens: toks, sc: sc}
	f.pairBrackets()
	return f, nil
}

// Line is the 1-based line of a token.
func (f *File) Line(tok Token) int { return f.sc.line(tok.Pos) }

// Errorf is an *Error at the token's line.
func (f *File) Errorf(tok Token, format string, args ...any) error {
	return &Error{File: f.Name, Line: f.Line(tok), Msg: fmt.Sprintf(format, args...)}
}

// pairBrackets records where each (, [ and { closes (-1: never), so that
// Match is one lookup however deeply brackets nest.
func (f *File) pairBrackets() {
	f.pair = make([]int, len(f.Tokens))
	var stack []int
	for j, tok := range f.Tokens {
		f.pair[j] = -1
		if tok.Kind != 'p' {
			continue
		}
		switch tok.Text {
		case "(", "[", "{":
			stack = append(stack, j)
		case ")", "]", "}":
			want := map[string]string{")": "(", "]": "[", "}": "{"}[tok.Text]
			// An unmatched closer ends the brackets opened after its opener.
			for k := len(stack) - 1; k >= 0; k-- {
				if f.Tokens[stack[k]].Text == want {
					f.pair[stack[k]] = j
					stack = stack[:k]
					break
				}
			}
		}
	}
}

// Match returns the index of the bracket that closes Tokens[i].
func (f *File) Match(i int) (int, error) {
	toks := f.Tokens
	open := toks[i].Text
	if open != "<" {
		if j := f.pair[i]; j >= 0 {
			return j, nil
		}
		return 0, f.Errorf(toks[i], "unbalanced %s", open)
	}
	// A template argument list: brackets inside it are skipped whole.
	depth := 0
	for j := i; j < len(toks); j++ {
		switch tok := toks[j]; {
		case tok.Is("<"):
			depth++
		case tok.Is(">"):
			depth--
			if depth == 0 {
				return j, nil
			}
		case tok.Is("(") || tok.Is("["):
			if f.pair[j] < 0 {
				return 0, f.Errorf(tok, "unbalanced %s", tok.Text)
			}
			j = f.pair[j]
		case tok.Is(";") || tok.Is("{") || tok.Is("}") || tok.Is(")") || tok.Is("]"):
			return 0, f.Errorf(toks[i], "unbalanced <")
		}
	}
	return 0, f.Errorf(toks[i], "unbalanced <")
}

// attribute reports whether Tokens[i:] starts with [[ and returns the index
// of the last ] of the attribute.
func (f *File) attribute(i int) (int, bool) {
	toks := f.Tokens
	if i+1 >= len(toks) || !toks[i].Is("[") || !toks[i+1].Is("[") || toks[i+1].Pos != toks[i].End {
		return 0, false
	}
	j, err := f.Match(i + 1)
	if err != nil || j+1 >= len(toks) || !toks[j+1].Is("]") {
		return 0, false
	}
	return j + 1, true
}

// Declarations calls handle with each namespace-level declaration in
// [lo, hi): its first token, its end and its body (see Declaration).
func (f *File) Declarations(lo, hi int, handle func(i, end, body int) error) error {
	toks := f.Tokens
	for i := lo; i < hi; {
		tok := toks[i]
		switch {
		case tok.Is(";") || tok.Is("}"):
			i++
			continue
		case tok.Is("namespace"):
			// namespace [name] { ... }: its declarations are namespace-level too.
			j := i + 1
			for j < hi && !toks[j].Is("{") && !toks[j].Is(";") && !toks[j].Is("=") {
				j++
			}
			if j < hi && toks[j].Is("{") {
				i = j + 1
				continue
			}
		case tok.Is("extern") && i+2 < hi && toks[i+1].Kind == 's' && toks[i+2].Is("{"):
			i += 3
			continue
		}
		end, body, err := f.Declaration(i, hi)
		if err != nil {
			return err
		}
		if err := handle(i, end, body); err != nil {
			return err
		}
		i = end + 1
	}
	return nil
}

// Declaration finds the end of the declaration at Tokens[i]: the index of
// its ';', or of the '}' that closes a function body; body is the index of
// that body's '{' (or -1).
func (f *File) Declaration(i, hi int) (end, body int, err error) {
	toks := f.Tokens
	aggregate, assign := false, false
	for j := i; j < hi; j++ {
		tok := toks[j]
		switch {
		case tok.Is("struct") || tok.Is("class") || tok.Is("union") || tok.Is("enum"):
			aggregate = true
		case tok.Is("="):
			assign = true
		case tok.Is("template") && j+1 < hi && toks[j+1].Is("<"):
			// Skip the parameter list: a default argument's '=' is no initializer.
			k, err := f.Match(j + 1)
			if err != nil {
				return 0, 0, err
			}
			j = k
		case tok.Is("(") || tok.Is("["):
			k, err := f.Match(j)
			if err != nil {
				return 0, 0, err
			}
			j = k
		case tok.Is("{"):
			k, err := f.Match(j)
			if err != nil {
				return 0, 0, err
			}
			if !aggregate && !assign {
				return k, j, nil
			}
			j = k
		case tok.Is(";"):
			return j, -1, nil
		}
	}
	return 0, 0, f.Errorf(toks[i], "declaration without an end")
}

// HostNameAttr is, for the declaration [i, end) that starts with template,
// the last token of its [[host_name(...)]] attribute if it is an explicit
// instantiation that names a kernel.
func (f *File) HostNameAttr(i, end int) (int, bool) {
	if i+1 >= end {
		return 0, false
	}
	if a, ok := f.attribute(i + 1); ok && f.Tokens[i+3].Is("host_name") {
		return a, true
	}
	return 0, false
}

// FunctionConstantAttr is, for the declaration [i, end) that starts with
// constant, the first and last tokens of its [[function_constant(i)]]
// attribute if it declares a function constant.
func (f *File) FunctionConstantAttr(i, end int) (k, a int, ok bool) {
	for k := i; k < end; k++ {
		if a, ok := f.attribute(k); ok && f.Tokens[k+2].Is("function_constant") {
			return k, a, true
		}
	}
	return 0, 0, false
}

// Signature reads a function definition's tokens before its body, [i,
// body): whether it is a kernel (the keyword kernel, or a [[kernel]]
// attribute) and the keyword's index (-1: none). attr, if not nil, gets the
// first and last token of each attribute.
func (f *File) Signature(i, body int, attr func(k, a int)) (isKernel bool, kw int) {
	toks := f.Tokens
	kw = -1
	for k := i; k < body; k++ {
		if toks[k].Is("kernel") {
			isKernel, kw = true, k
		}
		if a, ok := f.attribute(k); ok {
			if toks[k+2].Is("kernel") && a == k+4 {
				isKernel = true
			}
			if attr != nil {
				attr(k, a)
			}
			k = a
		}
	}
	return isKernel, kw
}

// ThreadgroupVar is one variable of a kernel-local `threadgroup` declaration.
type ThreadgroupVar struct {
	Name string
	Dims string // the array dimensions as written ("[32]", "[4][8]"); "" for one value
	Line int
}

// ThreadgroupLocals calls local with each `threadgroup` declaration of
// kernel-local variables in the function body [lo, hi): the keyword's
// index, its ';', the variables' type and the variables. A pointer
// declaration (threadgroup T *p = ...) is a per-thread local and is left out.
func (f *File) ThreadgroupLocals(lo, hi int, local func(j, end int, typ string, vars []ThreadgroupVar)) error {
	toks := f.Tokens
	for j := lo; j < hi; j++ {
		if !toks[j].Is("threadgroup") {
			continue
		}
		if j > lo {
			if prev := toks[j-1]; !prev.Is(";") && !prev.Is("{") && !prev.Is("}") {
				continue
			}
		}
		end := j
		for end < hi && !toks[end].Is(";") {
			if toks[end].Is("(") || toks[end].Is("[") || toks[end].Is("{") {
				m, err := f.Match(end)
				if err != nil {
					return err
				}
				end = m
			}
			end++
		}
		if end >= hi {
			return f.Errorf(toks[j], "threadgroup declaration without ';'")
		}
		typ, vars, err := f.threadgroupVars(j+1, end)
		if err != nil {
			return err
		}
		if vars != nil {
			local(j, end, typ, vars)
		}
		j = end
	}
	return nil
}

// threadgroupVars reads `threadgroup T a[N], b;` (tokens after the keyword
// up to ';'); no variables for a pointer declaration.
func (f *File) threadgroupVars(lo, hi int) (string, []ThreadgroupVar, error) {
	toks := f.Tokens
	// Split at top-level commas; <> counts outside brackets (types).
	var decls [][2]int
	start, depth := lo, 0
	for j := lo; j < hi; j++ {
		switch {
		case toks[j].Is("[") || toks[j].Is("("):
			m, err := f.Match(j)
			if err != nil {
				return "", nil, err
			}
			j = m
		case toks[j].Is("<"):
			depth++
		case toks[j].Is(">"):
			depth--
		case toks[j].Is(",") && depth == 0:
			decls = append(decls, [2]int{start, j})
			start = j + 1
		}
	}
	decls = append(decls, [2]int{start, hi})
	// The first declarator's name: the last identifier before '[', '=' or the end.
	d0 := decls[0]
	nameAt := -1
	for j := d0[0]; j < d0[1]; j++ {
		if toks[j].Is("[") || toks[j].Is("=") {
			break
		}
		if toks[j].Is("<") {
			m, err := f.Match(j)
			if err != nil {
				return "", nil, err
			}
			j = m
			continue
		}
		if toks[j].Kind == 'i' {
			nameAt = j
		}
	}
	if nameAt <= d0[0] {
		return "", nil, f.Errorf(toks[lo], "threadgroup declaration: expected `threadgroup T name[N];`")
	}
	for j := d0[0]; j < nameAt; j++ {
		if toks[j].Is("*") || toks[j].Is("&") {
			return "", nil, nil // a pointer to threadgroup memory
		}
	}
	var vars []ThreadgroupVar
	for n, d := range decls {
		from := d[0]
		if n == 0 {
			from = nameAt
		}
		if from >= d[1] || toks[from].Kind != 'i' {
			return "", nil, f.Errorf(toks[lo], "threadgroup declaration: a declarator must be a name (pointers cannot be mixed in)")
		}
		v := ThreadgroupVar{Name: toks[from].Text, Line: f.Line(toks[from])}
		for j := from + 1; j < d[1]; j++ {
			if toks[j].Is("=") {
				return "", nil, f.Errorf(toks[j], "threadgroup variable %s cannot have an initializer", v.Name)
			}
			if !toks[j].Is("[") {
				return "", nil, f.Errorf(toks[j], "threadgroup variable %s: unexpected %q", v.Name, toks[j].Text)
			}
			m, err := f.Match(j)
			if err != nil {
				return "", nil, err
			}
			v.Dims += Join(toks[j : m+1])
			j = m
		}
		vars = append(vars, v)
	}
	return Join(toks[d0[0]:nameAt]), vars, nil
}
