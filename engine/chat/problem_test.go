package chat

import (
	"strings"
	"testing"
)

func TestExplainParseErrorsKeepTheirPlace(t *testing.T) {
	for _, c := range []struct {
		src        string
		line, col  int
		msgContain string
	}{
		{"hello\n{% if x %}\nfoo", 3, 4, "endif"},
		{"{{ messages[0].content }}\n\n{% for m in messages %}{{ m.content }}{% endfor", 3, 0, ""},
	} {
		_, err := ParseCustom(c.src)
		if err == nil {
			t.Fatalf("%q parsed", c.src)
		}
		p := Explain(err)
		if p.Line != c.line || (c.col > 0 && p.Column != c.col) {
			t.Errorf("%q: %+v, want line %d column %d", c.src, p, c.line, c.col)
		}
		if strings.Contains(p.Message, "failed to parse template") || strings.Contains(p.Message, c.src) {
			t.Errorf("%q: the message quotes the template: %q", c.src, p.Message)
		}
		if !strings.Contains(p.Message, c.msgContain) {
			t.Errorf("%q: message %q lacks %q", c.src, p.Message, c.msgContain)
		}
	}
}

func TestExplainRenderErrors(t *testing.T) {
	for _, c := range []struct {
		src  string
		line int
		want string
	}{
		{"ok\n{{ messages[0].content | nosuchfilter }}", 2, "filter 'nosuchfilter' not found"},
		{"{{ raise_exception('no system role') }}", 0, "the template raised an exception: no system role"},
	} {
		tpl, err := ParseCustom(c.src)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		_, err = tpl.Render([]Message{{"user", "hi"}}, Vars{})
		if err == nil {
			t.Fatalf("%q rendered", c.src)
		}
		p := Explain(err)
		if p.Line != c.line || p.Message != c.want {
			t.Errorf("%q: %+v, want line %d %q", c.src, p, c.line, c.want)
		}
	}
}

func TestNoneIsThePlainContents(t *testing.T) {
	msgs := []Message{{"system", "Be brief."}, {"user", ""}, {"user", "Hi  "}, {"assistant", "Hello."}, {"user", "Bye"}}
	out, err := None().Render(msgs, Vars{BOS: "<s>", EOS: "</s>", AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Be brief.\n\nHi  \n\nHello.\n\nBye"; out != want {
		t.Fatalf("None renders %q, want %q", out, want)
	}
	if None().Name() != NoneName || None().Source() == "" {
		t.Fatalf("None is named %q with source %q", None().Name(), None().Source())
	}
}

func TestParseCustomIsNamedAndKeepsItsSource(t *testing.T) {
	src := "{% for m in messages %}{{ m.content }}{% endfor %}"
	tpl, err := ParseCustom(src)
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Name() != CustomName || tpl.Source() != src {
		t.Fatalf("name %q source %q", tpl.Name(), tpl.Source())
	}
	if Fallback("llama").Source() == "" {
		t.Fatal("a built-in template has no source")
	}
}
