package settings

import (
	"errors"
	"math"
	"strings"
	"testing"

	"nibble/engine/sample"
)

func TestDefaults(t *testing.T) {
	d := Defaults()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.Server.Enabled || d.Server.Address != "127.0.0.1:11435" || d.Slots != 2 || d.Threads != 0 ||
		d.KVType != "auto" || d.Theme != "system" || d.Hotkey != "" || d.StartAtLogin || d.MaxReplyTokens != 2048 {
		t.Fatalf("unexpected defaults: %+v", d)
	}
	var names []string
	for _, q := range d.QuickActions {
		names = append(names, q.Name)
	}
	if got := strings.Join(names, ", "); got != "Summarize, Explain, Fix grammar, Translate to English, Draft a reply" {
		t.Fatalf("quick actions: %s", got)
	}
	if d.Sampling.Params() != sample.Defaults() {
		t.Fatalf("sampling defaults differ from the engine's: %+v", d.Sampling.Params())
	}
	// Each call is a fresh value.
	d.QuickActions[0].Name = "changed"
	if Defaults().QuickActions[0].Name != "Summarize" {
		t.Fatal("Defaults shares its quick actions")
	}
}

func TestQuickActionRender(t *testing.T) {
	q := QuickAction{"X", "Say {{text}}, then {{text}} again"}
	if got := q.Render("hi {{text}}"); got != "Say hi {{text}}, then hi {{text}} again" {
		t.Fatal(got)
	}
}

func TestValidateNamesFields(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Settings)
	}{
		{"version", func(s *Settings) { s.Version = 7 }},
		{"contextTokens", func(s *Settings) { s.ContextTokens = 511 }},
		{"contextTokens", func(s *Settings) { s.ContextTokens = MaxContext + 1 }},
		{"kvType", func(s *Settings) { s.KVType = "Q4" }},
		{"sampling.temperature", func(s *Settings) { s.Sampling.Temperature = -0.1 }},
		{"sampling.temperature", func(s *Settings) { s.Sampling.Temperature = float32(math.NaN()) }},
		{"sampling.topP", func(s *Settings) { s.Sampling.TopP = 1.5 }},
		{"sampling.topK", func(s *Settings) { s.Sampling.TopK = -1 }},
		{"sampling.minP", func(s *Settings) { s.Sampling.MinP = -0.01 }},
		{"sampling.repeatPenalty", func(s *Settings) { s.Sampling.RepeatPenalty = 0 }},
		{"theme", func(s *Settings) { s.Theme = "blue" }},
		{"hotkey", func(s *Settings) { s.Hotkey = "cmd++space" }},
		{"hotkey", func(s *Settings) { s.Hotkey = "cmd+shift space" }},
		{"server.address", func(s *Settings) { s.Server.Address = "0.0.0.0:11435" }},
		{"slots", func(s *Settings) { s.Slots = 0 }},
		{"threads", func(s *Settings) { s.Threads = -1 }},
		{"quickActions[1].name", func(s *Settings) { s.QuickActions[1].Name = "  " }},
		{"quickActions[2].name", func(s *Settings) { s.QuickActions[2].Name = "summarize" }},
		{"quickActions[0].prompt", func(s *Settings) { s.QuickActions[0].Prompt = "Summarize {text}" }},
		{"lastModel", func(s *Settings) { s.LastModel = "a\x00b" }},
		{"memoryLimit", func(s *Settings) { s.MemoryLimit = -1 }},
		{"modelFiles[0]", func(s *Settings) { s.ModelFiles = []string{"relative/model.gguf"} }},
		{"modelFiles[1]", func(s *Settings) { s.ModelFiles = []string{"/m/a.gguf", "/m/a\x00.gguf"} }},
		{"modelFiles[1]", func(s *Settings) { s.ModelFiles = []string{"/m/a.gguf", "/m/./a.gguf"} }},
		{"documentMaxBytes", func(s *Settings) { s.DocumentMaxBytes = -1 }},
		{"documentMaxBytes", func(s *Settings) { s.DocumentMaxBytes = MaxDocumentMaxBytes + 1 }},
		{`promptTemplates["m.gguf"]`, func(s *Settings) { s.PromptTemplates = map[string]PromptTemplate{"m.gguf": {Mode: "none"}} }},
		{`promptTemplates["/m.gguf"].mode`, func(s *Settings) { s.PromptTemplates = map[string]PromptTemplate{"/m.gguf": {Mode: "jinja"}} }},
		{`promptTemplates["/m.gguf"].source`, func(s *Settings) {
			s.PromptTemplates = map[string]PromptTemplate{"/m.gguf": {Mode: PromptTemplateCustom, Source: " \n"}}
		}},
		{`promptTemplates["/m.gguf"].source`, func(s *Settings) {
			s.PromptTemplates = map[string]PromptTemplate{"/m.gguf": {Mode: PromptTemplateNone, Source: "{{ x }}"}}
		}},
		{"maxReplyTokens", func(s *Settings) { s.MaxReplyTokens = -1 }},
		{"maxReplyTokens", func(s *Settings) { s.MaxReplyTokens = MaxContext + 1 }},
	} {
		s := Defaults()
		tc.edit(&s)
		err := s.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.field+": ") {
			t.Errorf("%s: message %q does not start with the field", tc.field, err)
		}
	}

	// Every bad field is reported, not just the first.
	s := Defaults()
	s.Sampling.Temperature, s.Slots, s.Theme = -1, 99, ""
	msg := s.Validate().Error()
	for _, f := range []string{"sampling.temperature", "slots", "theme"} {
		if !strings.Contains(msg, f+": ") {
			t.Errorf("%q does not name %s", msg, f)
		}
	}

	// Edge values that are fine.
	s = Defaults()
	s.ContextTokens, s.Sampling.Temperature, s.Sampling.TopP, s.Sampling.TopK, s.Sampling.MinP = MinContext, 0, 1, 0, 0
	s.Hotkey, s.Threads, s.Slots, s.QuickActions = "cmd+shift+space", MaxThreads, MaxSlots, nil
	s.MemoryLimit, s.ModelFiles = 1<<30, []string{"/models/a.gguf", "/other/a.gguf"}
	s.PromptTemplates = map[string]PromptTemplate{"/models/a.gguf": {Mode: PromptTemplateNone},
		"/other/a.gguf": {Mode: PromptTemplateCustom, Source: "{{ messages[0].content }}"}}
	s.MaxReplyTokens = 0 // no limit
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.MaxReplyTokens = MaxContext
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestServerAddress(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:11435":              true,
		"127.0.0.2:8080":               true, // all of 127/8 is loopback
		"[::1]:11435":                  true,
		"[::ffff:127.0.0.1]:11435":     true,
		"0.0.0.0:11435":                false,
		"[::]:11435":                   false,
		"192.168.1.10:11435":           false,
		"localhost:11435":              false, // a name can resolve anywhere
		"127.0.0.1":                    false,
		"127.0.0.1:0":                  false,
		"127.0.0.1:70000":              false,
		":11435":                       false,
		"":                             false,
		"http://127.0.0.1:11435":       false,
		"127.0.0.1:11435 ":             false,
		"[fe80::1%en0]:11435":          false,
		"[::1]:11435/v1":               false,
		"127.0.0.1:11435,0.0.0.0:1143": false,
	} {
		s := Defaults()
		s.Server.Address = addr
		err := s.Validate()
		if (err == nil) != ok {
			t.Errorf("%q: got %v, want ok=%v", addr, err, ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "server.address: ") {
			t.Errorf("%q: message %q does not name the field", addr, err)
		}
	}
}

func TestCloneCopiesPromptTemplates(t *testing.T) {
	s := Defaults()
	s.PromptTemplates = map[string]PromptTemplate{"/m/a.gguf": {Mode: PromptTemplateNone}}
	c := s.Clone()
	c.PromptTemplates["/m/b.gguf"] = PromptTemplate{Mode: PromptTemplateNone}
	if len(s.PromptTemplates) != 1 {
		t.Fatal("Clone shares the prompt templates")
	}
}
