package chat

import (
	"testing"
)

// FuzzParseRender: a template from a model file is untrusted input; Parse and Render may fail
// but must not panic or hang.
func FuzzParseRender(f *testing.F) {
	for _, s := range []string{
		"{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}",
		"{{ '%s-%d' % ('a', 3) }}{{ 'a\\nb' 'c' }}{% if x is defined %}{{ x.get('y', 1) }}{% endif %}",
		"{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
		"{{ messages | tojson(indent=2) }}{{ {'a': [1, 2.5, none]} | items | list }}",
		"{% macro f(x) %}{{ x[::-1] }}{% endmacro %}{{ f('abc') }}{% raw %}{{ }}{% endraw %}",
		"  {%- if true +%}\n  x {#- c -#}\n{% endif %}",
	} {
		f.Add(s)
	}
	msgs := []Message{{"system", "s"}, {"user", "u"}, {"assistant", "a"}}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		tpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tpl.Render(msgs, Vars{BOS: "<s>", AddGenerationPrompt: true, Now: fixedClock})
	})
}
