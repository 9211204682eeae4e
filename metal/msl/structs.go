package msl

import (
	"fmt"
	"slices"
)

// Struct is a struct defined at file scope in MSL source: its data members
// in order (member functions and static members are left out).
type Struct struct {
	Name   string
	File   string
	Line   int
	Fields []Field
}

// Field is a data member: `Type Name;` or `Type Name[Len];`.
type Field struct {
	Name string
	Type string // as written, tokens joined by single spaces ("uint", "device const char *")
	Len  string // an array's length as written ("16", "ATTN_MAXH*ATTN_EV"); "" for one value
	Line int
}

// Structs returns the structs the sources define at file scope, in source
// order. A data member it cannot read (a bit-field, an initializer, an
// array of several dimensions) is an error at its line.
func Structs(srcs []Source) ([]Struct, error) {
	var out []Struct
	for _, s := range srcs {
		sc := newScanner(s.Text)
		toks, err := sc.tokens()
		if err != nil {
			if e, ok := err.(*Error); ok {
				e.File = s.Name
			}
			return nil, err
		}
		p := structParser{file: s.Name, sc: sc, toks: toks}
		got, err := p.structs()
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

type structParser struct {
	file string
	sc   *scanner
	toks []Token
}

func (p *structParser) errAt(tok Token, format string, args ...any) error {
	return &Error{File: p.file, Line: p.sc.line(tok.Pos), Msg: fmt.Sprintf(format, args...)}
}

// skip returns the index after the bracket that closes the one at i.
func (p *structParser) skip(i int) (int, error) {
	open := p.toks[i].Text
	close := map[string]string{"{": "}", "(": ")", "[": "]"}[open]
	depth := 0
	for j := i; j < len(p.toks); j++ {
		switch {
		case p.toks[j].Is(open):
			depth++
		case p.toks[j].Is(close):
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, p.errAt(p.toks[i], "unbalanced %s", open)
}

// structs finds `struct name {` outside every brace and parses its body.
func (p *structParser) structs() ([]Struct, error) {
	var out []Struct
	for i := 0; i < len(p.toks); {
		t := p.toks[i]
		switch {
		case t.Is("struct") && i+2 < len(p.toks) && p.toks[i+1].Kind == 'i' && p.toks[i+2].Is("{"):
			st := Struct{Name: p.toks[i+1].Text, File: p.file, Line: p.sc.line(t.Pos)}
			end, err := p.skip(i + 2)
			if err != nil {
				return nil, err
			}
			if st.Fields, err = p.members(i+3, end-1); err != nil {
				return nil, err
			}
			out = append(out, st)
			i = end
		case t.Is("{"):
			end, err := p.skip(i)
			if err != nil {
				return nil, err
			}
			i = end
		default:
			i++
		}
	}
	return out, nil
}

// members reads the data members of a struct body, toks[lo:hi].
func (p *structParser) members(lo, hi int) ([]Field, error) {
	var fields []Field
	for i := lo; i < hi; {
		// One member: up to its ';', or through the body of a member
		// function (which needs no ';').
		start, function, static, bodyEnd := i, false, false, false
		for i < hi && !p.toks[i].Is(";") && !bodyEnd {
			t := p.toks[i]
			switch {
			case t.Is("static") || t.Is("typedef") || t.Is("using"):
				static = true
			case t.Is("("):
				function = true
			}
			if t.Is("(") || t.Is("[") || t.Is("{") {
				end, err := p.skip(i)
				if err != nil {
					return nil, err
				}
				bodyEnd = t.Is("{") && function
				i = end
				continue
			}
			i++
		}
		if !function && !static && i > start {
			fs, err := p.declaration(start, i)
			if err != nil {
				return nil, err
			}
			fields = append(fields, fs...)
		}
		if !bodyEnd {
			i++ // the ';'
		}
	}
	return fields, nil
}

// declaration reads `T a, b[N]` from toks[lo:hi]: the type is what comes
// before the first declarator's name.
func (p *structParser) declaration(lo, hi int) ([]Field, error) {
	var fields []Field
	var typ []Token
	for i := lo; i < hi; {
		j := i // this declarator: toks[i:j]
		for j < hi && !p.toks[j].Is(",") {
			j++
		}
		// The name is the last identifier before any '['.
		end := j
		for k := i; k < j; k++ {
			if p.toks[k].Is("[") {
				end = k
				break
			}
		}
		name := end - 1
		if name < i || p.toks[name].Kind != 'i' || (typ == nil && name == i) {
			return nil, p.errAt(p.toks[i], "member %q: not a declaration this parser reads", Join(p.toks[i:j]))
		}
		if typ == nil {
			typ = p.toks[i:name]
		} else if name != i {
			return nil, p.errAt(p.toks[i], "member %q: a pointer or qualifier on a later declarator", Join(p.toks[i:j]))
		}
		f := Field{Name: p.toks[name].Text, Type: joinSpaced(typ), Line: p.sc.line(p.toks[name].Pos)}
		switch rest := p.toks[end:j]; {
		case len(rest) == 0:
		case len(rest) >= 3 && rest[0].Is("[") && rest[len(rest)-1].Is("]") && !slices.ContainsFunc(rest[1:len(rest)-1], func(t Token) bool { return t.Is("]") }):
			f.Len = Join(rest[1 : len(rest)-1])
		default:
			return nil, p.errAt(p.toks[end], "member %s: %q after the name", f.Name, Join(rest))
		}
		fields = append(fields, f)
		i = j + 1
	}
	return fields, nil
}

// joinSpaced joins tokens with single spaces.
func joinSpaced(toks []Token) string {
	s := ""
	for i, t := range toks {
		if i > 0 {
			s += " "
		}
		s += t.Text
	}
	return s
}
