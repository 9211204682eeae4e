package chat

import "testing"

func TestApplyLStripBlocks(t *testing.T) {
	cases := []struct{ in, want string }{
		{"  {% if x %}", "{% if x %}"},
		{"a\n \t{% if x %}", "a\n{% if x %}"},
		{"{{ x }} {% if x %}", "{{ x }} {% if x %}"}, // not at line start: kept
		{"{% if %}\n  {% x %}", "{% if %}\n{% x %}"}, // newline stays for trim_blocks
		{"a\n  {%+ if x %}", "a\n  {%+ if x %}"},     // '+' keeps
		{"a\n  {%- if x %}", "a\n  {%- if x %}"},     // '-' is gonja's business
		{"a\n  {{ x }}", "a\n  {{ x }}"},             // variables are never lstripped
		{"a\n  {# c #}", "a\n{# c #}"},               // comments are
		{"{{ {'a': {'b': 1}} }}  {% x %}", "{{ {'a': {'b': 1}} }}  {% x %}"},
		{"{{ '}}' }}\n  {% x %}", "{{ '}}' }}\n{% x %}"},
		{"{% raw %}\n  {% x %}{% endraw %}", "{% raw %}\n  {% x %}{% endraw %}"},
		{"a\n  {% unterminated", "a\n{% unterminated"},
		{"x { y %} {", "x { y %} {"},
	}
	for _, c := range cases {
		if got := applyLStripBlocks(c.in); got != c.want {
			t.Errorf("applyLStripBlocks(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
