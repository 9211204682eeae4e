package chat

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// FuzzParseRender: a template from a model file is untrusted input. Parse and Render may fail,
// but must not crash the process or hang, and a template that parsed must
//   - render without an internal error (a panic in gonja or in our patches, which Render
//     recovers; a template's own mistakes are ordinary errors);
//   - render deterministically: the same text, or the same error, twice in a row (the prompt
//     cache reuses the KV of a rendered prefix);
//
// and ForModelOrFallback must always give a template, reporting a problem exactly when the
// source did not parse.
func FuzzParseRender(f *testing.F) {
	for _, s := range []string{
		"{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}",
		"{{ '%s-%d' % ('a', 3) }}{{ 'a\\nb' 'c' }}{% if x is defined %}{{ x.get('y', 1) }}{% endif %}",
		"{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
		"{{ messages | tojson(indent=2) }}{{ {'a': [1, 2.5, none]} | items | list }}",
		"{% macro f(x) %}{{ x[::-1] }}{% endmacro %}{{ f('abc') }}{% raw %}{{ }}{% endraw %}",
		"  {%- if true +%}\n  x {#- c -#}\n{% endif %}",
		// shapes behind crashes the fuzzer found or that sit next to them (guard.go)
		"{% set ns = namespace(n=0) %}{% set ns.n = [ns.n] %}{{ ns }}",
		"{% macro f(n) %}{% if n %}({{ f(n - 1) }}){% endif %}{% endmacro %}{{ f(3) }}",
		"{% macro f() %}[{{ caller() }}]{% endmacro %}{% call f() %}x{% endcall %}",
		"{{ 'ab' | center(9) }}{{ 'a'.zfill(3) }}{{ 'a\nb' | indent(2) }}{{ 7 % 2 }}{{ 'ab' * 2 }}",
	} {
		f.Add(s)
	}
	for _, src := range fallbackSources {
		f.Add(src)
	}
	msgs := []Message{{"system", "s"}, {"user", "u"}, {"assistant", "a"}}
	vars := Vars{BOS: "<s>", AddGenerationPrompt: true, Now: fixedClock}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 || mayRepeatHugely(src) {
			return
		}
		tpl, err := Parse(src)
		if fb, problem := ForModelOrFallback(src, "llama", nil); fb == nil || (problem != nil) != (err != nil && src != "") {
			t.Fatalf("template %q: ForModelOrFallback gave %v, %v; Parse %v", src, fb, problem, err)
		}
		if err != nil {
			return
		}
		out1, err1 := tpl.Render(msgs, vars)
		if errors.Is(err1, errInternal) {
			t.Fatalf("template %q: %v", src, err1)
		}
		out2, err2 := tpl.Render(msgs, vars)
		if out1 != out2 || errString(err1) != errString(err2) {
			t.Fatalf("template %q renders differently twice:\n%q, %v\n%q, %v", src, out1, err1, out2, err2)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// mayRepeatHugely bounds the fuzzed property: gonja evaluates 'text' * n with strings.Repeat
// inside its evaluator, where Render cannot check n, so 'a' * 10**10 exhausts memory, and Go
// cannot recover from that. No chat template repeats text more than a few times. Inputs that
// could ask for a huge repetition are skipped: two or more "*" (chained or powers), or one
// with a long or exponent-form number anywhere in the template.
func mayRepeatHugely(src string) bool {
	n := strings.Count(src, "*")
	return n >= 2 || n == 1 && longNumber.MatchString(src)
}

var longNumber = regexp.MustCompile(`[0-9]{7}|[0-9][eE]`)
