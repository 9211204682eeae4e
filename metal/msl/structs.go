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
	toks []token
}

func (p *structParser) errAt(tok token, format string, args ...any) error {
	return &Error{File: p.file, Line: p.sc.line(tok.pos), Msg: fmt.Sprintf(format, args...)}
}

// skip returns the index after the bracket that closes the one at i.
func (p *structParser) skip(i int) (int, error) {
	open := p.toks[i].text
	close := map[string]string{"{": "}", "(": ")", "[": "]"}[open]
	depth := 0
	for j := i; j < len(p.toks); j++ {
		switch {
		case p.toks[j].is(open):
			depth++
		case p.toks[j].is(close):
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
		case t.is("struct") && i+2 < len(p.toks) && p.toks[i+1].kind == 'i' && p.toks[i+2].is("{"):
			st := Struct{Name: p.toks[i+1].text, File: p.file, Line: p.sc.line(t.pos)}
			end, err := p.skip(i + 2)
			if err != nil {
				return nil, err
			}
			if st.Fields, err = p.members(i+3, end-1); err != nil {
				return nil, err
			}
			out = append(out, st)
			i = end
		case t.is("{"):
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
		for i < hi && !p.toks[i].is(";") && !bodyEnd {
			t := p.toks[i]
			switch {
			case t.is("static") || t.is("typedef") || t.is("using"):
				static = true
			case t.is("("):
				function = true
			}
			if t.is("(") || t.is("[") || t.is("{") {
				end, err := p.skip(i)
				if err != nil {
					return nil, err
				}
				bodyEnd = t.is("{") && function
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
	var typ []token
	for i := lo; i < hi; {
		j := i // this declarator: toks[i:j]
		for j < hi && !p.toks[j].is(",") {
			j++
		}
		// The name is the last identifier before any '['.
		end := j
		for k := i; k < j; k++ {
			if p.toks[k].is("[") {
				end = k
				break
			}
		}
		name := end - 1
		if name < i || p.toks[name].kind != 'i' || (typ == nil && name == i) {
			return nil, p.errAt(p.toks[i], "member %q: not a declaration this parser reads", join(p.toks[i:j]))
		}
		if typ == nil {
			typ = p.toks[i:name]
		} else if name != i {
			return nil, p.errAt(p.toks[i], "member %q: a pointer or qualifier on a later declarator", join(p.toks[i:j]))
		}
		f := Field{Name: p.toks[name].text, Type: joinSpaced(typ), Line: p.sc.line(p.toks[name].pos)}
		switch rest := p.toks[end:j]; {
		case len(rest) == 0:
		case len(rest) >= 3 && rest[0].is("[") && rest[len(rest)-1].is("]") && !slices.ContainsFunc(rest[1:len(rest)-1], func(t token) bool { return t.is("]") }):
			f.Len = join(rest[1 : len(rest)-1])
		default:
			return nil, p.errAt(p.toks[end], "member %s: %q after the name", f.Name, join(rest))
		}
		fields = append(fields, f)
		i = j + 1
	}
	return fields, nil
}

// joinSpaced joins tokens with single spaces.
func joinSpaced(toks []token) string {
	s := ""
	for i, t := range toks {
		if i > 0 {
			s += " "
		}
		s += t.text
	}
	return s
}
