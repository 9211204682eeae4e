// Package msl is the pre-pass that turns Metal Shading Language sources into
// C++ for the MSL emulator (metal/emulator). It rewrites only what C++ cannot
// parse, and keeps every line where it was (#line per file, no edit adds or
// removes a newline), so compiler errors and the emulator's reports point
// at the .metal file and line:
//
//   - `constant T x [[function_constant(i)]];` becomes a variable the
//     runtime sets before each dispatch (plus a "defined" flag for
//     is_function_constant_defined), and program-scope constants computed
//     from function constants are recomputed after it;
//   - kernel parameters lose their attributes and get default arguments
//     that read the running GPU thread's context ([[buffer(i)]],
//     [[threadgroup(i)]] and the built-in positions), so a kernel is called
//     with no arguments;
//   - every kernel, and every `template [[host_name("…")]]` instantiation,
//     registers itself by name (a static constructor on the same line);
//   - a kernel-local `threadgroup T buf[N];` becomes a reference to storage
//     shared by the threadgroup (a plain local would give each thread its
//     own copy and silently wrong results);
//   - half literals (1.0h) become clang's (1.0f16).
//
// The rest (address spaces, vector types, metal:: functions) is the shim
// header's job. The package is plain Go and builds everywhere.
package msl

import (
	"fmt"
	"strconv"
	"strings"
)

// Source is one .metal file: a name for #line and error messages, and its text.
type Source struct {
	Name string
	Text string
}

// Unit is the translation of a set of sources: one C++ translation unit
// and what the runtime will register when it is loaded.
type Unit struct {
	Code      string
	Kernels   []Kernel   // in registration order
	Constants []Constant // in declaration order
}

// Kernel is an entry point the runtime can dispatch by name.
type Kernel struct {
	Name       string // the host name (the function's name unless host_name gives one)
	Function   string // the C++ function or function template
	Args       string // template arguments of a host_name instantiation
	File       string
	Line       int
	MaxThreads int // [[max_total_threads_per_threadgroup(n)]], or 0
	Params     []Param
	// Constants are the function constants the kernel's body names,
	// directly or through a constant computed from them (not through the
	// functions it calls).
	Constants []string
}

// Param is one kernel parameter and its attribute.
type Param struct {
	Name  string
	Type  string
	Attr  string // "buffer", "threadgroup", or a built-in such as "thread_position_in_grid"
	Index int    // of buffer(i) and threadgroup(i)
}

// Constant is a function constant.
type Constant struct {
	Name     string
	Type     string
	Index    int
	File     string
	Line     int
	Optional bool // the sources ask is_function_constant_defined(name)
}

// Error is a translation error at a .metal line.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// builtins maps the thread-position attributes to the shim's names.
var builtins = map[string]string{
	"thread_position_in_grid":             "thread_position_in_grid",
	"thread_position_in_threadgroup":      "thread_position_in_threadgroup",
	"threadgroup_position_in_grid":        "threadgroup_position_in_grid",
	"threads_per_threadgroup":             "threads_per_threadgroup",
	"dispatch_threads_per_threadgroup":    "threads_per_threadgroup",
	"threadgroups_per_grid":               "threadgroups_per_grid",
	"threads_per_grid":                    "threads_per_grid",
	"grid_size":                           "threads_per_grid",
	"thread_index_in_threadgroup":         "thread_index_in_threadgroup",
	"thread_index_in_simdgroup":           "thread_index_in_simdgroup",
	"simdgroup_index_in_threadgroup":      "simdgroup_index_in_threadgroup",
	"simdgroups_per_threadgroup":          "simdgroups_per_threadgroup",
	"dispatch_simdgroups_per_threadgroup": "simdgroups_per_threadgroup",
	"threads_per_simdgroup":               "threads_per_simdgroup",
	"thread_execution_width":              "threads_per_simdgroup",
}

// Concat joins sources into one MSL text with a #line directive before each,
// for a Metal compiler (newLibraryWithSource) that should report the same
// file names and lines as the emulator.
func Concat(srcs []Source) string {
	var b strings.Builder
	for _, s := range srcs {
		fmt.Fprintf(&b, "#line 1 %s\n", strconv.Quote(s.Name))
		b.WriteString(s.Text)
		if !strings.HasSuffix(s.Text, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Translate rewrites the sources into one C++ translation unit, in order.
// Like one Metal library from their concatenation, they share one scope.
func Translate(srcs []Source) (*Unit, error) {
	t := &translator{
		unit:      &Unit{},
		templates: map[string]*Kernel{},
		constants: map[string][]string{},
		hostNames: map[string]string{},
	}
	var b strings.Builder
	b.WriteString("// Generated by metal/msl from the .metal sources; edit those.\n#include <metal_stdlib>\n")
	for _, s := range srcs {
		if s.Name == "" || strings.ContainsAny(s.Name, "\"\\\n") {
			return nil, fmt.Errorf("msl: bad source name %q", s.Name)
		}
		out, err := t.file(s)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "#line 1 %s\n", strconv.Quote(s.Name))
		b.WriteString(out)
		if !strings.HasSuffix(out, "\n") {
			b.WriteByte('\n')
		}
	}
	for name, at := range t.optional {
		found := false
		for k := range t.unit.Constants {
			if t.unit.Constants[k].Name == name {
				t.unit.Constants[k].Optional = true
				found = true
			}
		}
		if !found {
			return nil, &Error{File: at.file, Line: at.line, Msg: fmt.Sprintf("is_function_constant_defined(%s): no function constant %s", name, name)}
		}
	}
	t.unit.Code = b.String()
	return t.unit, nil
}

type place struct {
	file string
	line int
}

type translator struct {
	unit      *Unit
	templates map[string]*Kernel  // kernel templates by function name
	constants map[string][]string // function constants, and constants computed from them, to the function constants they read
	hostNames map[string]string   // kernel name -> where it was defined
	optional  map[string]place
	nreg      int // registrars and threadgroup locals emitted so far (unique ids)

	// per file
	name  string
	sc    *scanner
	toks  []token
	pair  []int // see pairBrackets
	edits []edit
}

type edit struct {
	pos, end int
	text     string
}

func (t *translator) errAt(tok token, format string, args ...any) error {
	return &Error{File: t.name, Line: t.sc.line(tok.pos), Msg: fmt.Sprintf(format, args...)}
}

func (t *translator) line(tok token) int { return t.sc.line(tok.pos) }

// replace replaces the source from token a to token b (inclusive) with text,
// padded with the newlines it covered.
func (t *translator) replace(a, b token, text string) {
	n := strings.Count(t.sc.src[a.pos:b.end], "\n")
	t.edits = append(t.edits, edit{a.pos, b.end, text + strings.Repeat("\n", n)})
}

func (t *translator) file(s Source) (string, error) {
	t.name = s.Name
	t.sc = newScanner(s.Text)
	t.edits = nil
	toks, err := t.sc.tokens()
	if err != nil {
		err.(*Error).File = s.Name
		return "", err
	}
	t.toks = toks
	t.pairBrackets()
	for k, tok := range toks {
		if tok.is("is_function_constant_defined") && k+3 < len(toks) && toks[k+1].is("(") && toks[k+2].kind == 'i' && toks[k+3].is(")") {
			if t.optional == nil {
				t.optional = map[string]place{}
			}
			t.optional[toks[k+2].text] = place{s.Name, t.line(tok)}
		}
	}
	if err := t.scope(0, len(toks)); err != nil {
		return "", err
	}
	for _, tok := range toks {
		if fixed, ok := fixLiteral(tok); ok {
			t.edits = append(t.edits, edit{tok.pos, tok.end, fixed})
		}
	}
	return t.apply(s.Text)
}

// apply makes the edits; a literal fix inside a replaced declaration is
// dropped (the replacement was written with fixed literals).
func (t *translator) apply(src string) (string, error) {
	es := t.edits
	// Stable insertion sort by position: there are few edits.
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].pos < es[j-1].pos; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	var b strings.Builder
	at := 0
	for _, e := range es {
		if e.pos < at {
			continue // inside an earlier replacement
		}
		b.WriteString(src[at:e.pos])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(src[at:])
	out := b.String()
	if strings.Count(out, "\n") != strings.Count(src, "\n") {
		return "", fmt.Errorf("msl: %s: internal error: the rewrite moved lines", t.name)
	}
	return out, nil
}

// pairBrackets records where each (, [ and { closes (-1: never), so that
// match is one lookup however deeply brackets nest.
func (t *translator) pairBrackets() {
	t.pair = make([]int, len(t.toks))
	var stack []int
	for j, tok := range t.toks {
		t.pair[j] = -1
		if tok.kind != 'p' {
			continue
		}
		switch tok.text {
		case "(", "[", "{":
			stack = append(stack, j)
		case ")", "]", "}":
			want := map[string]string{")": "(", "]": "[", "}": "{"}[tok.text]
			// An unmatched closer ends the brackets opened after its opener.
			for k := len(stack) - 1; k >= 0; k-- {
				if t.toks[stack[k]].text == want {
					t.pair[stack[k]] = j
					stack = stack[:k]
					break
				}
			}
		}
	}
}

// match returns the index of the bracket that closes toks[i].
func (t *translator) match(i int) (int, error) {
	open := t.toks[i].text
	if open != "<" {
		if j := t.pair[i]; j >= 0 {
			return j, nil
		}
		return 0, t.errAt(t.toks[i], "unbalanced %s", open)
	}
	// A template argument list: brackets inside it are skipped whole.
	depth := 0
	for j := i; j < len(t.toks); j++ {
		switch tok := t.toks[j]; {
		case tok.is("<"):
			depth++
		case tok.is(">"):
			depth--
			if depth == 0 {
				return j, nil
			}
		case tok.is("(") || tok.is("["):
			if t.pair[j] < 0 {
				return 0, t.errAt(tok, "unbalanced %s", tok.text)
			}
			j = t.pair[j]
		case tok.is(";") || tok.is("{") || tok.is("}") || tok.is(")") || tok.is("]"):
			return 0, t.errAt(t.toks[i], "unbalanced <")
		}
	}
	return 0, t.errAt(t.toks[i], "unbalanced <")
}

// attribute reports whether toks[i:] starts with [[ and returns the index of
// the last ] of the attribute.
func (t *translator) attribute(i int) (int, bool) {
	if i+1 >= len(t.toks) || !t.toks[i].is("[") || !t.toks[i+1].is("[") || t.toks[i+1].pos != t.toks[i].end {
		return 0, false
	}
	j, err := t.match(i + 1)
	if err != nil || j+1 >= len(t.toks) || !t.toks[j+1].is("]") {
		return 0, false
	}
	return j + 1, true
}

// scope walks the declarations of a namespace-level token range.
func (t *translator) scope(lo, hi int) error {
	for i := lo; i < hi; {
		tok := t.toks[i]
		switch {
		case tok.is(";") || tok.is("}"):
			i++
			continue
		case tok.is("namespace"):
			// namespace [name] { ... }: its declarations are namespace-level too.
			j := i + 1
			for j < hi && !t.toks[j].is("{") && !t.toks[j].is(";") && !t.toks[j].is("=") {
				j++
			}
			if j < hi && t.toks[j].is("{") {
				i = j + 1
				continue
			}
		case tok.is("extern") && i+2 < hi && t.toks[i+1].kind == 's' && t.toks[i+2].is("{"):
			i += 3
			continue
		}
		end, body, err := t.declaration(i, hi)
		if err != nil {
			return err
		}
		if err := t.handle(i, end, body); err != nil {
			return err
		}
		i = end + 1
	}
	return nil
}

// declaration finds the end of the namespace-level declaration at toks[i]:
// the index of its ';', or of the '}' that closes a function body; body is
// the index of that body's '{' (or -1).
func (t *translator) declaration(i, hi int) (end, body int, err error) {
	aggregate, assign := false, false
	for j := i; j < hi; j++ {
		tok := t.toks[j]
		switch {
		case tok.is("struct") || tok.is("class") || tok.is("union") || tok.is("enum"):
			aggregate = true
		case tok.is("="):
			assign = true
		case tok.is("template") && j+1 < hi && t.toks[j+1].is("<"):
			// Skip the parameter list: a default argument's '=' is no initializer.
			k, err := t.match(j + 1)
			if err != nil {
				return 0, 0, err
			}
			j = k
		case tok.is("(") || tok.is("["):
			k, err := t.match(j)
			if err != nil {
				return 0, 0, err
			}
			j = k
		case tok.is("{"):
			k, err := t.match(j)
			if err != nil {
				return 0, 0, err
			}
			if !aggregate && !assign {
				return k, j, nil
			}
			j = k
		case tok.is(";"):
			return j, -1, nil
		}
	}
	return 0, 0, t.errAt(t.toks[i], "declaration without an end")
}

func (t *translator) handle(i, end, body int) error {
	toks := t.toks
	first := toks[i]
	switch {
	case first.is("template") && i+1 < end:
		if a, ok := t.attribute(i + 1); ok && toks[i+3].is("host_name") {
			return t.hostName(i, a, end)
		}
	case first.is("constant"):
		for k := i; k < end; k++ {
			if a, ok := t.attribute(k); ok && toks[k+2].is("function_constant") {
				return t.functionConstant(i, k, a, end)
			}
		}
		return t.derivedConstant(i, end)
	}
	if body < 0 {
		return nil
	}
	isKernel := false
	for k := i; k < body; k++ {
		if toks[k].is("kernel") {
			isKernel = true
		}
		if a, ok := t.attribute(k); ok {
			if toks[k+2].is("kernel") && a == k+4 {
				isKernel = true
			}
			k = a
		}
	}
	if isKernel {
		if err := t.kernel(i, body, end); err != nil {
			return err
		}
	}
	return t.body(body+1, end)
}

// functionConstant: constant T name [[function_constant(i)]];
func (t *translator) functionConstant(i, at, atEnd, end int) error {
	toks := t.toks
	if at-1 <= i+1 || toks[at-1].kind != 'i' {
		return t.errAt(toks[i], "function constant: expected `constant T name [[function_constant(i)]];`")
	}
	name := toks[at-1].text
	typ := join(toks[i+1 : at-1])
	if !toks[at+3].is("(") {
		return t.errAt(toks[at], "function_constant needs an index")
	}
	cl, err := t.match(at + 3)
	if err != nil {
		return err
	}
	idxText := join(toks[at+4 : cl])
	idx, err := strconv.Atoi(idxText)
	if err != nil || idx < 0 || idx > 65535 {
		return t.errAt(toks[at], "function_constant(%s): the index must be a number in 0..65535", idxText)
	}
	if atEnd+1 != end {
		return t.errAt(toks[at], "function constant %s: expected ';' after the attribute", name)
	}
	for _, c := range t.unit.Constants {
		if c.Name == name {
			return t.errAt(toks[at], "function constant %s is declared twice (%s:%d)", name, c.File, c.Line)
		}
		if c.Index == idx {
			return t.errAt(toks[at], "function constants %s and %s share index %d", c.Name, name, idx)
		}
	}
	line := t.line(toks[i])
	t.unit.Constants = append(t.unit.Constants, Constant{Name: name, Type: typ, Index: idx, File: t.name, Line: line})
	t.constants[name] = []string{name}
	t.replace(toks[i], toks[end], fmt.Sprintf(
		"static %s %s; static bool __msl_fcdef_%s; static __msl::constant_reg __msl_fcreg_%s(%d, %q, &%s, sizeof(%s), &__msl_fcdef_%s, %q, %q, %d);",
		typ, name, name, name, idx, name, name, name, name, typ, t.name, line))
	return nil
}

// derivedConstant: a program-scope `constant T name = expr;` whose value
// depends on a function constant is recomputed after they are set.
func (t *translator) derivedConstant(i, end int) error {
	toks := t.toks
	eq := -1
	for k := i; k < end; k++ {
		if toks[k].is("=") {
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
		if toks[k].kind != 'i' {
			continue
		}
		if fc, ok := t.constants[toks[k].text]; ok {
			deps = append(deps, fc...)
			depends = true
		}
		if toks[k].text == "is_function_constant_defined" {
			depends = true
		}
	}
	if !depends {
		return nil
	}
	if eq-1 <= i+1 || toks[eq-1].kind != 'i' {
		return t.errAt(toks[i], "a constant computed from function constants must be a scalar or vector: `constant T name = expr;`")
	}
	name := toks[eq-1].text
	t.constants[name] = deps
	t.nreg++
	t.edits = append(t.edits,
		edit{toks[i].pos, toks[i].end, "static"},
		edit{toks[eq].pos, toks[eq].end, fmt.Sprintf("; static __msl::derived_reg __msl_fcd_%d([]{ %s = (", t.nreg, name)},
		edit{toks[end].pos, toks[end].end, "); });"})
	return nil
}

// kernel rewrites a kernel's signature and, unless it is a template,
// registers it.
func (t *translator) kernel(i, body, end int) error {
	toks := t.toks
	k := &Kernel{File: t.name}
	isTemplate := toks[i].is("template")
	open := -1
	for j := i; j < body; j++ {
		if a, ok := t.attribute(j); ok {
			switch {
			case toks[j+2].is("max_total_threads_per_threadgroup") && toks[j+3].is("("):
				n, err := strconv.Atoi(join(toks[j+4 : a-2]))
				if err != nil || n <= 0 {
					return t.errAt(toks[j], "max_total_threads_per_threadgroup needs a positive number")
				}
				k.MaxThreads = n
			case toks[j+2].is("kernel") && a == j+4:
			default:
				return t.errAt(toks[j], "unsupported attribute [[%s]] on a kernel", toks[j+2].text)
			}
			t.replace(toks[j], toks[a], "")
			j = a
			continue
		}
		if toks[j].is("(") {
			open = j
			break
		}
	}
	if open < 1 || toks[open-1].kind != 'i' {
		return t.errAt(toks[i], "kernel: cannot find the function name")
	}
	k.Function = toks[open-1].text
	k.Name = k.Function
	k.Line = t.line(toks[open-1])
	cl, err := t.match(open)
	if err != nil {
		return err
	}
	if err := t.params(k, open+1, cl); err != nil {
		return err
	}
	k.Constants = t.uses(body, end)
	if isTemplate {
		t.templates[k.Function] = k
		return nil
	}
	return t.register(k, toks[end], fmt.Sprintf("%s();", k.Function))
}

// uses lists the function constants that tokens [lo, hi) name.
func (t *translator) uses(lo, hi int) []string {
	seen := map[string]bool{}
	var out []string
	for _, tok := range t.toks[lo:hi] {
		if tok.kind != 'i' {
			continue
		}
		for _, fc := range t.constants[tok.text] {
			if !seen[fc] {
				seen[fc] = true
				out = append(out, fc)
			}
		}
	}
	return out
}

func (t *translator) register(k *Kernel, after token, call string) error {
	if at, ok := t.hostNames[k.Name]; ok {
		return &Error{File: k.File, Line: k.Line, Msg: fmt.Sprintf("kernel %s is already defined at %s", k.Name, at)}
	}
	t.hostNames[k.Name] = fmt.Sprintf("%s:%d", k.File, k.Line)
	t.nreg++
	t.edits = append(t.edits, edit{after.end, after.end, fmt.Sprintf(
		" static __msl::kernel_reg __msl_kreg_%d(%q, +[]{ %s }, %q, %d, %d);", t.nreg, k.Name, call, k.File, k.Line, k.MaxThreads)})
	t.unit.Kernels = append(t.unit.Kernels, *k)
	return nil
}

// params gives every kernel parameter a default argument that reads its
// attribute's value from the running thread.
func (t *translator) params(k *Kernel, lo, hi int) error {
	toks := t.toks
	start := lo
	for j := lo; j <= hi; j++ {
		if j < hi {
			switch {
			case toks[j].is("(") || toks[j].is("[") || toks[j].is("<"):
				if toks[j].is("[") {
					if a, ok := t.attribute(j); ok {
						j = a
						continue
					}
				}
				m, err := t.match(j)
				if err != nil {
					return err
				}
				j = m
				continue
			case !toks[j].is(","):
				continue
			}
		}
		if j == start {
			if j == hi && len(k.Params) == 0 {
				break // no parameters
			}
			return t.errAt(toks[j], "kernel %s: empty parameter", k.Function)
		}
		if err := t.param(k, start, j); err != nil {
			return err
		}
		start = j + 1
	}
	return nil
}

func (t *translator) param(k *Kernel, lo, hi int) error {
	toks := t.toks
	at := -1
	for j := lo; j < hi; j++ {
		if _, ok := t.attribute(j); ok {
			at = j
			break
		}
	}
	if at < 0 {
		return t.errAt(toks[lo], "kernel %s: parameter %q has no attribute ([[buffer(i)]], [[threadgroup(i)]] or a thread position)", k.Function, join(toks[lo:hi]))
	}
	a, _ := t.attribute(at)
	if a+1 != hi {
		return t.errAt(toks[at], "kernel %s: unexpected tokens after the attribute", k.Function)
	}
	if at-1 <= lo || toks[at-1].kind != 'i' {
		return t.errAt(toks[lo], "kernel %s: parameter without a name", k.Function)
	}
	p := Param{Name: toks[at-1].text, Type: join(toks[lo : at-1]), Attr: toks[at+2].text}
	var def string
	switch p.Attr {
	case "buffer", "threadgroup":
		if !toks[at+3].is("(") || a-2 <= at+4 {
			return t.errAt(toks[at], "kernel %s: %s needs an index", k.Function, p.Attr)
		}
		idx, err := strconv.Atoi(join(toks[at+4 : a-2]))
		if err != nil || idx < 0 || idx > 30 {
			return t.errAt(toks[at], "kernel %s: %s(%s): the index must be a number in 0..30", k.Function, p.Attr, join(toks[at+4:a-2]))
		}
		p.Index = idx
		fn := "buffer"
		if p.Attr == "threadgroup" {
			fn = "threadgroup_arg"
		}
		def = fmt.Sprintf("= __msl::%s<%s>(%d, %q, %d)", fn, p.Type, idx, t.name, t.line(toks[at]))
	default:
		b, ok := builtins[p.Attr]
		if !ok || a != at+4 {
			return t.errAt(toks[at], "kernel %s: attribute [[%s]] is not supported by the emulator", k.Function, join(toks[at+2:a-1]))
		}
		def = fmt.Sprintf("= __msl::builtin<%s>(__msl::%s)", p.Type, b)
	}
	for _, q := range k.Params {
		if q.Attr == p.Attr && (p.Attr == "buffer" || p.Attr == "threadgroup") && q.Index == p.Index {
			return t.errAt(toks[at], "kernel %s: %s(%d) is used twice", k.Function, p.Attr, p.Index)
		}
	}
	k.Params = append(k.Params, p)
	t.replace(toks[at], toks[a], def)
	return nil
}

// hostName: template [[host_name("name")]] ... function<args> ...;
func (t *translator) hostName(i, a, end int) error {
	toks := t.toks
	if !toks[i+4].is("(") || toks[i+5].kind != 's' || !toks[i+6].is(")") {
		return t.errAt(toks[i], "host_name needs a string")
	}
	name, err := strconv.Unquote(toks[i+5].text)
	if err != nil || name == "" {
		return t.errAt(toks[i], "host_name needs a string")
	}
	var tmpl *Kernel
	fn := -1
	for j := a + 1; j < end; j++ {
		if kt, ok := t.templates[toks[j].text]; ok && toks[j].kind == 'i' && toks[j+1].is("<") {
			tmpl, fn = kt, j
			break
		}
	}
	if tmpl == nil {
		return t.errAt(toks[i], "host_name(%q): no kernel template is instantiated here", name)
	}
	cl, err := t.match(fn + 1)
	if err != nil {
		return err
	}
	args := join(toks[fn+2 : cl])
	k := *tmpl
	k.Name, k.Args, k.File, k.Line = name, args, t.name, t.line(toks[i])
	// The whole instantiation becomes the registrar: calling the template
	// instantiates it.
	t.replace(toks[i], toks[end], "")
	return t.register(&k, toks[end], fmt.Sprintf("%s<%s>();", k.Function, args))
}

// body rewrites the kernel-local threadgroup variables of a function body.
func (t *translator) body(lo, hi int) error {
	toks := t.toks
	for j := lo; j < hi; j++ {
		if !toks[j].is("threadgroup") {
			continue
		}
		if j > lo {
			if prev := toks[j-1]; !prev.is(";") && !prev.is("{") && !prev.is("}") {
				continue
			}
		}
		end := j
		for end < hi && !toks[end].is(";") {
			if toks[end].is("(") || toks[end].is("[") || toks[end].is("{") {
				m, err := t.match(end)
				if err != nil {
					return err
				}
				end = m
			}
			end++
		}
		if end >= hi {
			return t.errAt(toks[j], "threadgroup declaration without ';'")
		}
		text, ok, err := t.threadgroupLocal(j+1, end)
		if err != nil {
			return err
		}
		if ok {
			t.replace(toks[j], toks[end], text)
		}
		j = end
	}
	return nil
}

// threadgroupLocal rewrites `threadgroup T a[N], b;` (tokens after the
// keyword up to ';'). A pointer declaration (threadgroup T *p = ...) is a
// per-thread local and stays.
func (t *translator) threadgroupLocal(lo, hi int) (string, bool, error) {
	toks := t.toks
	// Split at top-level commas; <> counts outside brackets (types).
	var decls [][2]int
	start, depth := lo, 0
	for j := lo; j < hi; j++ {
		switch {
		case toks[j].is("[") || toks[j].is("("):
			m, err := t.match(j)
			if err != nil {
				return "", false, err
			}
			j = m
		case toks[j].is("<"):
			depth++
		case toks[j].is(">"):
			depth--
		case toks[j].is(",") && depth == 0:
			decls = append(decls, [2]int{start, j})
			start = j + 1
		}
	}
	decls = append(decls, [2]int{start, hi})
	// The first declarator's name: the last identifier before '[', '=' or the end.
	d0 := decls[0]
	nameAt := -1
	for j := d0[0]; j < d0[1]; j++ {
		if toks[j].is("[") || toks[j].is("=") {
			break
		}
		if toks[j].is("<") {
			m, err := t.match(j)
			if err != nil {
				return "", false, err
			}
			j = m
			continue
		}
		if toks[j].kind == 'i' {
			nameAt = j
		}
	}
	if nameAt <= d0[0] {
		return "", false, t.errAt(toks[lo], "threadgroup declaration: expected `threadgroup T name[N];`")
	}
	for j := d0[0]; j < nameAt; j++ {
		if toks[j].is("*") || toks[j].is("&") {
			return "", false, nil // a pointer to threadgroup memory
		}
	}
	typ := join(toks[d0[0]:nameAt])
	var out []string
	for n, d := range decls {
		from := d[0]
		if n == 0 {
			from = nameAt
		}
		if from >= d[1] || toks[from].kind != 'i' {
			return "", false, t.errAt(toks[lo], "threadgroup declaration: a declarator must be a name (pointers cannot be mixed in)")
		}
		name := toks[from].text
		dims := ""
		for j := from + 1; j < d[1]; j++ {
			if toks[j].is("=") {
				return "", false, t.errAt(toks[j], "threadgroup variable %s cannot have an initializer", name)
			}
			if !toks[j].is("[") {
				return "", false, t.errAt(toks[j], "threadgroup variable %s: unexpected %q", name, toks[j].text)
			}
			m, err := t.match(j)
			if err != nil {
				return "", false, err
			}
			dims += join(toks[j : m+1])
			j = m
		}
		t.nreg++
		loc := fmt.Sprintf("(%d, %q, %d)", t.nreg, t.name, t.line(toks[from]))
		if dims == "" {
			out = append(out, fmt.Sprintf("%s &%s = *__msl::threadgroup_local<%s>%s;", typ, name, typ, loc))
		} else {
			out = append(out, fmt.Sprintf("%s (&%s)%s = *__msl::threadgroup_local<%s %s>%s;", typ, name, dims, typ, dims, loc))
		}
	}
	return strings.Join(out, " "), true, nil
}
