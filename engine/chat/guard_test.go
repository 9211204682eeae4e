package chat

import (
	"errors"
	"strings"
	"testing"
)

// Templates that used to crash the process (a Go stack overflow or out-of-memory cannot be
// recovered) or panic inside gonja now fail with an ordinary error. Each case is something a
// hostile or broken tokenizer.chat_template can contain.
func TestHostileTemplatesFail(t *testing.T) {
	cases := []struct{ name, src, want string }{
		// a namespace holding itself: printing, comparing or reading it recursed forever
		{"ns cycle", "{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns }}", "cannot contain itself"},
		{"ns cycle read", "{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns.n.n }}", "cannot contain itself"},
		{"ns cycle via list", "{% set ns = namespace(n=0) %}{% set ns.n = [1, ns] %}{{ ns == ns }}", "cannot contain itself"},
		{"ns cycle via other", "{% set a = namespace(x=0) %}{% set b = namespace(y=a) %}{% set a.x = b %}{{ a }}", "cannot contain itself"},
		// a value doubled in a loop: printing it was exponential
		{"ns doubling", "{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}", "larger than"},
		{"ns nesting", "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}", "deeper than"},
		// unbounded macro recursion
		{"macro recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "nested deeper than"},
		{"mutual recursion", "{% macro f() %}{{ g() }}{% endmacro %}{% macro g() %}{{ f() }}{% endmacro %}{{ f() }}", "nested deeper than"},
		// widths that allocated gigabytes
		{"center filter", "{{ 'ab' | center(10000000000) }}", "too large"},
		{"indent filter", "{{ 'a\nb' | indent(10000000000) }}", "too large"},
		{"zfill", "{{ 'a'.zfill(10000000000) }}", "too large"},
		// gonja's operators panicking on bad operands
		{"modulo zero", "{{ 1 % 0 }}", "invalid operands"},
		{"negative repeat", "{{ 'a' * -1 }}", "invalid operands"},
		{"repeat overflow", "{{ 'ab' * 4611686018427387904 }}", "invalid operands"},
		{"repeat too large", "{{ 'a' * 4611686018427387904 }}", "invalid operands"},
	}
	for _, c := range cases {
		tpl, err := Parse(c.src)
		if err != nil {
			t.Errorf("%s: parse: %v", c.name, err)
			continue
		}
		out, err := tpl.Render([]Message{{"user", "u"}}, Vars{Now: fixedClock})
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, errInternal) {
			t.Errorf("%s: got %.80q, %.300v; want an error with %q", c.name, out, err, c.want)
		}
	}
}

// jinja2 assigns only to a name or a namespace attribute; gonja also took ns['k'] and a.b.c,
// which escaped the namespace checks.
func TestSetTargets(t *testing.T) {
	for _, src := range []string{
		"{% set ns = namespace(a=1) %}{% set ns['a'] = 2 %}",
		"{% set ns = namespace(a=namespace(b=1)) %}{% set ns.a.b = 2 %}",
		"{% set f() = 1 %}",
		"{% set %}",
	} {
		if _, err := Parse(src); err == nil {
			t.Errorf("%q parsed", src)
		}
	}
	tpl, err := Parse("{% set x = 1 %}{% set ns = namespace(a=x) %}{% set ns.a = ns.a + 1 %}" +
		"{% set y %}block{% endset %}{% set ns.b %}nsblock{% endset %}{{ x }} {{ ns.a }} {{ y }} {{ ns.b }}" +
		"{% set ns.l = [ns.a, ns.a] %}{% set ns.l = [ns.l, ns.l] %}{{ ns.l }}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(nil, Vars{})
	if want := "1 2 block nsblock[[2, 2], [2, 2]]"; out != want || err != nil {
		t.Errorf("got %q, %v; want %q", out, err, want)
	}
}

// Recursion within the limit still works (tool templates render nested schemas this way).
func TestMacroRecursionWithinLimit(t *testing.T) {
	tpl, err := Parse("{% macro f(n) %}{% if n > 0 %}({{ f(n - 1) }}){% endif %}{% endmacro %}{{ f(50) }}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(nil, Vars{})
	if want := strings.Repeat("(", 50) + strings.Repeat(")", 50); out != want || err != nil {
		t.Errorf("got %q, %v", out, err)
	}
}

// str.zfill as CPython has it; gonja's panicked on the empty string (found by FuzzParseRender).
func TestZfill(t *testing.T) {
	tpl, err := Parse("{{ ''.zfill(1) }} {{ '-5'.zfill(4) }} {{ '+5'.zfill(3) }} {{ 'abc'.zfill(2) }} {{ '-'.zfill(3) }} {{ 'é'.zfill(3) }}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(nil, Vars{})
	if want := "0 -005 +05 abc -00 00é"; out != want || err != nil {
		t.Errorf("got %q, %v; want %q", out, err, want)
	}
}
