package chat

import (
	"errors"
	"nibble/internal/testdata"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func templatesDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testdata.Dir(t), "templates")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("chat template fixtures not available at %s: %v", dir, err)
	}
	return dir
}

func loadTemplate(t *testing.T, name string) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(templatesDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(string(src))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tpl
}

// The expected prompts below are written from each family's documented format.
func TestKnownFormats(t *testing.T) {
	llama3 := func(date string) string {
		return "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
			"Cutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n" +
			"You are helpful.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n"
	}
	cases := []struct {
		file, bos, eos, conv, want string
	}{
		// 3.1 and 3.3 hard-code date_string "26 Jul 2024"; 3.2 calls strftime_now("%d %b %Y").
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", "system", llama3("26 Jul 2024")},
		{"meta-llama-Llama-3.3-70B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", "system", llama3("26 Jul 2024")},
		{"meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", "system", llama3("05 Sep 2024")},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>", "system",
			"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n" +
				"<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>", "nosystem",
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
				"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n" +
				"<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"},
		// Nemo: no spaces around [INST]; the system prompt joins the last user message.
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>", "system",
			"<s>[INST]Hello[/INST]Hi there</s>[INST]You are helpful.\n\nHow are you?[/INST]"},
		// Gemma 2 has no system role (see TestRaiseException).
		{"google-gemma-2-2b-it.jinja", "<bos>", "<eos>", "nosystem",
			"<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n" +
				"<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n"},
		{"microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", "system",
			"<|system|>\nYou are helpful.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n" +
				"<|user|>\nHow are you?<|end|>\n<|assistant|>\n"},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.conv, func(t *testing.T) {
			tpl := loadTemplate(t, c.file)
			got, err := tpl.Render(goldenConversations[c.conv], Vars{BOS: c.bos, EOS: c.eos, AddGenerationPrompt: true, Now: fixedClock})
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("\n got: %q\nwant: %q", got, c.want)
			}
		})
	}
}

func TestAllTemplatesRender(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(templatesDir(t), "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			tpl := loadTemplate(t, name)
			conv := goldenConversations["system"]
			if strings.HasPrefix(name, "google-gemma") {
				conv = goldenConversations["nosystem"]
			}
			out, err := tpl.Render(conv, goldenVars)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range conv {
				if !strings.Contains(out, m.Content) {
					t.Errorf("output lacks %q:\n%s", m.Content, out)
				}
			}
			noGen := goldenVars
			noGen.AddGenerationPrompt = false
			if _, err := tpl.Render(conv, noGen); err != nil {
				t.Fatalf("without generation prompt: %v", err)
			}
		})
	}
}

func TestRaiseException(t *testing.T) {
	cases := []struct {
		file string
		conv []Message
		msg  string
	}{
		{"google-gemma-2-2b-it.jinja", goldenConversations["system"], "System role not supported"},
		{"google-gemma-2-2b-it.jinja", []Message{{"user", "a"}, {"user", "b"}},
			"Conversation roles must alternate user/assistant/user/assistant/..."},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", []Message{{"user", "a"}, {"user", "b"}},
			"After the optional system message, conversation roles must alternate user/assistant/user/assistant/..."},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", []Message{{"system", "s"}, {"assistant", "a"}},
			"After the optional system message, conversation roles must alternate user/assistant/user/assistant/..."},
	}
	for _, c := range cases {
		out, err := loadTemplate(t, c.file).Render(c.conv, goldenVars)
		var te *TemplateError
		if !errors.As(err, &te) || te.Msg != c.msg {
			t.Errorf("%s: want TemplateError %q, got %q, %v", c.file, c.msg, out, err)
			continue
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("error text %q lacks %q", err, c.msg)
		}
	}
	// raise_exception inside a macro and a loop still surfaces
	tpl, err := Parse("{% macro f(x) %}{{ raise_exception('bad ' ~ x) }}{% endmacro %}{% for m in messages %}{{ f(m.role) }}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Render(goldenConversations["nosystem"], goldenVars)
	var te *TemplateError
	if !errors.As(err, &te) || te.Msg != "bad user" {
		t.Errorf("macro raise: got %v", err)
	}
}

func TestClockInjection(t *testing.T) {
	tpl := loadTemplate(t, "meta-llama-Llama-3.2-3B-Instruct.jinja")
	v := goldenVars
	v.Now = func() time.Time { return time.Date(2031, 2, 3, 0, 0, 0, 0, time.UTC) }
	out, err := tpl.Render(goldenConversations["nosystem"], v)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Today Date: 03 Feb 2031\n") {
		t.Errorf("injected clock not used:\n%s", out)
	}
	// nil clock: today's date
	v.Now = nil
	out, err = tpl.Render(goldenConversations["nosystem"], v)
	if err != nil {
		t.Fatal(err)
	}
	if today := time.Now().Format("02 Jan 2006"); !strings.Contains(out, today) {
		t.Errorf("default clock: %q lacks %q", out, today)
	}
}

func TestBadTemplates(t *testing.T) {
	for _, src := range []string{
		"{% if %}",
		"{% for x in %}{% endfor %}",
		"{{ x ",
		"{% endif %}",
		"{% include 'other.jinja' %}",
		"{% import 'x' as y %}",
		"{% extends '/etc/passwd' %}",
	} {
		if tpl, err := Parse(src); err == nil {
			if _, err := tpl.Render(nil, Vars{}); err == nil {
				t.Errorf("%q: parsed and rendered without error", src)
			}
		}
	}
	for _, src := range []string{
		"{{ 1 % 0 }}",    // likewise
		"{{ 'x' * -1 }}", // strings.Repeat panics
		"{% for i in range(1000000) %}{% endfor %}", // over the range limit
		"{{ 'x' * 70000000 }}",                      // over the output limit
		"{{ [1] | tojson(bogus=1) }}",
		"{{ undefined_function() }}",
	} {
		tpl, err := Parse(src)
		if err != nil {
			continue
		}
		if out, err := tpl.Render(nil, Vars{}); err == nil {
			t.Errorf("%q: rendered %d bytes without error", src, len(out))
		}
	}
}

func TestConcurrentRender(t *testing.T) {
	tpl := loadTemplate(t, "meta-llama-Llama-3.1-8B-Instruct.jinja")
	want, err := tpl.Render(goldenConversations["system"], goldenVars)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				got, err := tpl.Render(goldenConversations["system"], goldenVars)
				if err == nil && got != want {
					err = errors.New("concurrent render differs")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMessageFieldsAndTypes(t *testing.T) {
	// content with Jinja syntax and quotes is data, not template
	tpl, err := Parse("{% for m in messages %}{{ m.content }}|{{ m['role'] }}|{{ m|tojson }}\n{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render([]Message{{"user", "{{ 1 + 1 }} \"q\" é"}}, Vars{})
	if err != nil {
		t.Fatal(err)
	}
	want := "{{ 1 + 1 }} \"q\" é|user|{\"role\": \"user\", \"content\": \"{{ 1 + 1 }} \\\"q\\\" é\"}\n"
	if out != want {
		t.Errorf("got %q want %q", out, want)
	}
}
