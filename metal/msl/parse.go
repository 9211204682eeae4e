package msl

import (
	"fmt"
	"strconv"
	"strings"
)

// An Emitter is told, as ParseWith walks the sources, where each construct
// is that a translation into another language rewrites, in source order.
// Ranges are given by their first and last tokens. The emulator's C++
// (metal/internal/msltoc) is written this way, so that it can never
// disagree with the kernels' metadata.
type Emitter interface {
	// BeginFile starts a source; the calls up to EndFile are in it.
	BeginFile(f *File)
	// FunctionConstant is a function constant's declaration, up to its ';'.
	FunctionConstant(c Constant, first, last Token)
	// DerivedConstant is `constant T name = expr;` at program scope where
	// expr reads a function constant: its keyword, '=' and ';'.
	DerivedConstant(name string, keyword, assign, semicolon Token)
	// KernelAttribute is an attribute of a kernel's signature ([[kernel]],
	// [[max_total_threads_per_threadgroup(n)]]), from [ to ].
	KernelAttribute(first, last Token)
	// Param is a kernel parameter's attribute, from [ to ].
	Param(p Param, first, last Token)
	// HostName is a `template [[host_name("…")]]` instantiation, up to its
	// ';'; the Kernel it names follows.
	HostName(first, last Token)
	// Kernel is a kernel to register, after the token that ends its
	// definition or instantiation.
	Kernel(k Kernel, after Token)
	// ThreadgroupLocal is a kernel-local threadgroup declaration, from the
	// keyword to its ';'.
	ThreadgroupLocal(keyword, semicolon Token, typ string, vars []ThreadgroupVar)
	// EndFile ends the source.
	EndFile() error
}

// Parse reads the sources, in order, as one Metal library: like one
// library from their concatenation, they share one scope.
func Parse(srcs []Source) (*Unit, error) { return ParseWith(srcs, nil) }

// ParseWith is Parse telling e (if not nil) what it finds.
func ParseWith(srcs []Source, e Emitter) (*Unit, error) {
	p := &parser{
		unit:      &Unit{},
		templates: map[string]*Kernel{},
		constants: map[string][]string{},
		hostNames: map[string]string{},
		emit:      e,
	}
	if e == nil {
		p.emit = noEmitter{}
	}
	for _, s := range srcs {
		if s.Name == "" || strings.ContainsAny(s.Name, "\"\\\n") {
			return nil, fmt.Errorf("msl: bad source name %q", s.Name)
		}
		if err := p.file(s); err != nil {
			return nil, err
		}
	}
	for name, at := range p.optional {
		found := false
		for k := range p.unit.Constants {
			if p.unit.Constants[k].Name == name {
				p.unit.Constants[k].Optional = true
				found = true
			}
		}
		if !found {
			return nil, &Error{File: at.file, Line: at.line, Msg: fmt.Sprintf("is_function_constant_defined(%s): no function constant %s", name, name)}
		}
	}
	return p.unit, nil
}

type noEmitter struct{}

func (noEmitter) BeginFile(*File)                                         {}
func (noEmitter) FunctionConstant(Constant, Token, Token)                 {}
func (noEmitter) DerivedConstant(string, Token, Token, Token)             {}
func (noEmitter) KernelAttribute(Token, Token)                            {}
func (noEmitter) Param(Param, Token, Token)                               {}
func (noEmitter) HostName(Token, Token)                                   {}
func (noEmitter) Kernel(Kernel, Token)                                    {}
func (noEmitter) ThreadgroupLocal(Token, Token, string, []ThreadgroupVar) {}
func (noEmitter) EndFile() error                                          { return nil }

type place struct {
	file string
	line int
}

type parser struct {
	unit      *Unit
	templates map[string]*Kernel  // kernel templates by function name
	constants map[string][]string // function constants, and constants computed from them, to the function constants they read
	hostNames map[string]string   // kernel name -> where it was defined
	optional  map[string]place
	emit      Emitter

	f    *File // the file being read
	toks []Token
}

func (p *parser) file(s Source) error {
	f, err := Scan(s)
	if err != nil {
		return err
	}
	p.f, p.toks = f, f.Tokens
	p.emit.BeginFile(f)
	toks := p.toks
	for k, tok := range toks {
		if tok.Is("is_function_constant_defined") && k+3 < len(toks) && toks[k+1].Is("(") && toks[k+2].Kind == 'i' && toks[k+3].Is(")") {
			if p.optional == nil {
				p.optional = map[string]place{}
			}
			p.optional[toks[k+2].Text] = place{s.Name, f.Line(tok)}
		}
	}
	if err := f.Declarations(0, len(toks), p.handle); err != nil {
		return err
	}
	return p.emit.EndFile()
}

func (p *parser) handle(i, end, body int) error {
	f, toks := p.f, p.toks
	first := toks[i]
	switch {
	case first.Is("template"):
		if a, ok := f.HostNameAttr(i, end); ok {
			return p.hostName(i, a, end)
		}
	case first.Is("constant"):
		if k, a, ok := f.FunctionConstantAttr(i, end); ok {
			return p.functionConstant(i, k, a, end)
		}
		return p.derivedConstant(i, end)
	}
	if body < 0 {
		return nil
	}
	if isKernel, _ := f.Signature(i, body, nil); isKernel {
		if err := p.kernel(i, body, end); err != nil {
			return err
		}
	}
	return f.ThreadgroupLocals(body+1, end, func(j, end int, typ string, vars []ThreadgroupVar) {
		p.emit.ThreadgroupLocal(toks[j], toks[end], typ, vars)
	})
}

// functionConstant: constant T name [[function_constant(i)]];
func (p *parser) functionConstant(i, at, atEnd, end int) error {
	f, toks := p.f, p.toks
	if at-1 <= i+1 || toks[at-1].Kind != 'i' {
		return f.Errorf(toks[i], "function constant: expected `constant T name [[function_constant(i)]];`")
	}
	name := toks[at-1].Text
	typ := Join(toks[i+1 : at-1])
	if !toks[at+3].Is("(") {
		return f.Errorf(toks[at], "function_constant needs an index")
	}
	cl, err := f.Match(at + 3)
	if err != nil {
		return err
	}
	idxText := Join(toks[at+4 : cl])
	idx, err := strconv.Atoi(idxText)
	if err != nil || idx < 0 || idx > 65535 {
		return f.Errorf(toks[at], "function_constant(%s): the index must be a number in 0..65535", idxText)
	}
	if atEnd+1 != end {
		return f.Errorf(toks[at], "function constant %s: expected ';' after the attribute", name)
	}
	for _, c := range p.unit.Constants {
		if c.Name == name {
			return f.Errorf(toks[at], "function constant %s is declared twice (%s:%d)", name, c.File, c.Line)
		}
		if c.Index == idx {
			return f.Errorf(toks[at], "function constants %s and %s share index %d", c.Name, name, idx)
		}
	}
	c := Constant{Name: name, Type: typ, Index: idx, File: f.Name, Line: f.Line(toks[i])}
	p.unit.Constants = append(p.unit.Constants, c)
	p.constants[name] = []string{name}
	p.emit.FunctionConstant(c, toks[i], toks[end])
	return nil
}

// derivedConstant: a program-scope `constant T name = expr;` whose value
// depends on a function constant.
func (p *parser) derivedConstant(i, end int) error {
	toks := p.toks
	eq := -1
	for k := i; k < end; k++ {
		if toks[k].Is("=") {
			eq = k
			break
		}
	}
	if eq < 0 {
		return nil
	}
	depends := false
	var deps []string
	for k := eq + 1; k < end; k++ {
		if toks[k].Kind != 'i' {
			continue
		}
		if fc, ok := p.constants[toks[k].Text]; ok {
			deps = append(deps, fc...)
			depends = true
		}
		if toks[k].Text == "is_function_constant_defined" {
			depends = true
		}
	}
	if !depends {
		return nil
	}
	if eq-1 <= i+1 || toks[eq-1].Kind != 'i' {
		return p.f.Errorf(toks[i], "a constant computed from function constants must be a scalar or vector: `constant T name = expr;`")
	}
	name := toks[eq-1].Text
	p.constants[name] = deps
	p.emit.DerivedConstant(name, toks[i], toks[eq], toks[end])
	return nil
}

// kernel reads a kernel's signature and, unless it is a template,
// registers it.
func (p *parser) kernel(i, body, end int) error {
	f, toks := p.f, p.toks
	k := &Kernel{File: f.Name}
	isTemplate := toks[i].Is("template")
	open := -1
	for j := i; j < body; j++ {
		if a, ok := f.attribute(j); ok {
			switch {
			case toks[j+2].Is("max_total_threads_per_threadgroup") && toks[j+3].Is("("):
				n, err := strconv.Atoi(Join(toks[j+4 : a-2]))
				if err != nil || n <= 0 {
					return f.Errorf(toks[j], "max_total_threads_per_threadgroup needs a positive number")
				}
				k.MaxThreads = n
			case toks[j+2].Is("kernel") && a == j+4:
			default:
				return f.Errorf(toks[j], "unsupported attribute [[%s]] on a kernel", toks[j+2].Text)
			}
			p.emit.KernelAttribute(toks[j], toks[a])
			j = a
			continue
		}
		if toks[j].Is("(") {
			open = j
			break
		}
	}
	if open < 1 || toks[open-1].Kind != 'i' {
		return f.Errorf(toks[i], "kernel: cannot find the function name")
	}
	k.Function = toks[open-1].Text
	k.Name = k.Function
	k.Line = f.Line(toks[open-1])
	cl, err := f.Match(open)
	if err != nil {
		return err
	}
	if err := p.params(k, open+1, cl); err != nil {
		return err
	}
	k.Constants = p.uses(body, end)
	if isTemplate {
		p.templates[k.Function] = k
		return nil
	}
	return p.register(k, toks[end])
}

// uses lists the function constants that tokens [lo, hi) name.
func (p *parser) uses(lo, hi int) []string {
	seen := map[string]bool{}
	var out []string
	for _, tok := range p.toks[lo:hi] {
		if tok.Kind != 'i' {
			continue
		}
		for _, fc := range p.constants[tok.Text] {
			if !seen[fc] {
				seen[fc] = true
				out = append(out, fc)
			}
		}
	}
	return out
}

func (p *parser) register(k *Kernel, after Token) error {
	if at, ok := p.hostNames[k.Name]; ok {
		return &Error{File: k.File, Line: k.Line, Msg: fmt.Sprintf("kernel %s is already defined at %s", k.Name, at)}
	}
	p.hostNames[k.Name] = fmt.Sprintf("%s:%d", k.File, k.Line)
	p.emit.Kernel(*k, after)
	p.unit.Kernels = append(p.unit.Kernels, *k)
	return nil
}

// params reads the kernel's parameters.
func (p *parser) params(k *Kernel, lo, hi int) error {
	toks := p.toks
	start := lo
	for j := lo; j <= hi; j++ {
		if j < hi {
			switch {
			case toks[j].Is("(") || toks[j].Is("[") || toks[j].Is("<"):
				if toks[j].Is("[") {
					if a, ok := p.f.attribute(j); ok {
						j = a
						continue
					}
				}
				m, err := p.f.Match(j)
				if err != nil {
					return err
				}
				j = m
				continue
			case !toks[j].Is(","):
				continue
			}
		}
		if j == start {
			if j == hi && len(k.Params) == 0 {
				break // no parameters
			}
			return p.f.Errorf(toks[j], "kernel %s: empty parameter", k.Function)
		}
		if err := p.param(k, start, j); err != nil {
			return err
		}
		start = j + 1
	}
	return nil
}

func (p *parser) param(k *Kernel, lo, hi int) error {
	f, toks := p.f, p.toks
	at := -1
	for j := lo; j < hi; j++ {
		if _, ok := f.attribute(j); ok {
			at = j
			break
		}
	}
	if at < 0 {
		return f.Errorf(toks[lo], "kernel %s: parameter %q has no attribute ([[buffer(i)]], [[threadgroup(i)]] or a thread position)", k.Function, Join(toks[lo:hi]))
	}
	a, _ := f.attribute(at)
	if a+1 != hi {
		return f.Errorf(toks[at], "kernel %s: unexpected tokens after the attribute", k.Function)
	}
	if at-1 <= lo || toks[at-1].Kind != 'i' {
		return f.Errorf(toks[lo], "kernel %s: parameter without a name", k.Function)
	}
	pa := Param{Name: toks[at-1].Text, Type: Join(toks[lo : at-1]), Attr: toks[at+2].Text}
	switch pa.Attr {
	case "buffer", "threadgroup":
		if !toks[at+3].Is("(") || a-2 <= at+4 {
			return f.Errorf(toks[at], "kernel %s: %s needs an index", k.Function, pa.Attr)
		}
		idx, err := strconv.Atoi(Join(toks[at+4 : a-2]))
		if err != nil || idx < 0 || idx > 30 {
			return f.Errorf(toks[at], "kernel %s: %s(%s): the index must be a number in 0..30", k.Function, pa.Attr, Join(toks[at+4:a-2]))
		}
		pa.Index = idx
	default:
		if _, ok := builtins[pa.Attr]; !ok || a != at+4 {
			return f.Errorf(toks[at], "kernel %s: attribute [[%s]] is not supported by the emulator", k.Function, Join(toks[at+2:a-1]))
		}
	}
	for _, q := range k.Params {
		if q.Attr == pa.Attr && (pa.Attr == "buffer" || pa.Attr == "threadgroup") && q.Index == pa.Index {
			return f.Errorf(toks[at], "kernel %s: %s(%d) is used twice", k.Function, pa.Attr, pa.Index)
		}
	}
	k.Params = append(k.Params, pa)
	p.emit.Param(pa, toks[at], toks[a])
	return nil
}

// hostName: template [[host_name("name")]] ... function<args> ...;
func (p *parser) hostName(i, a, end int) error {
	f, toks := p.f, p.toks
	if !toks[i+4].Is("(") || toks[i+5].Kind != 's' || !toks[i+6].Is(")") {
		return f.Errorf(toks[i], "host_name needs a string")
	}
	name, err := strconv.Unquote(toks[i+5].Text)
	if err != nil || name == "" {
		return f.Errorf(toks[i], "host_name needs a string")
	}
	var tmpl *Kernel
	fn := -1
	for j := a + 1; j < end; j++ {
		if kt, ok := p.templates[toks[j].Text]; ok && toks[j].Kind == 'i' && toks[j+1].Is("<") {
			tmpl, fn = kt, j
			break
		}
	}
	if tmpl == nil {
		return f.Errorf(toks[i], "host_name(%q): no kernel template is instantiated here", name)
	}
	cl, err := f.Match(fn + 1)
	if err != nil {
		return err
	}
	k := *tmpl
	k.Name, k.Args, k.File, k.Line = name, Join(toks[fn+2:cl]), f.Name, f.Line(toks[i])
	p.emit.HostName(toks[i], toks[end])
	return p.register(&k, toks[end])
}
