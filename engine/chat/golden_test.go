package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The golden files come from Python's jinja2 configured as transformers does; see
// testdata/gen_golden.py.

// fixedClock is the clock the golden files were generated with.
func fixedClock() time.Time { return time.Date(2024, 9, 5, 14, 3, 7, 0, time.UTC) }

var goldenConversations = map[string][]Message{
	"system": {
		{Role: "system", Content: "You are helpful."}, {Role: "user", Content: "Hello"},
		{Role: "assistant", Content: "Hi there"}, {Role: "user", Content: "How are you?"},
	},
	"nosystem": {
		{Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi there"},
		{Role: "user", Content: "How are you?"},
	},
}

var goldenVars = Vars{BOS: "<s>", EOS: "</s>", AddGenerationPrompt: true, Now: fixedClock}

// knownDivergences are the snippets where gonja differs from jinja2 and we accept it; the value
// is what we render ("ERROR" for a render error). All stem from gonja having one nil for both
// None and undefined, plus integer ** and per-byte string indexing.
var knownDivergences = map[string]string{
	// None prints as "" (jinja2: "None").
	"get":           "1  dflt system none",
	"render_values": "[][True][False][[1, 'a', , True]][{'a': 'b'}][1.0][2.5][3][2.5][1][8.0][][1e+20][0.30000000000000004]",
	"concat":        "a1 ab === [1, 2]",
	// tools is None, which gonja cannot tell from undefined: "tools is defined" is false.
	"tests": "False True True True False True False True True True True True True True False True True True True True",
	// String indexing is per byte in gonja ('日本語'[1]); slicing is per character.
	"unicode": "\u0097 3 語本日 école",
}

type snippetGolden struct {
	Name, Src, Out, Error string
}

type templateGolden struct {
	Template, Conversation, Out, Error string
}

func loadJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// checkRaised asserts err is the TemplateError jinja2 reported as pyErr.
func checkRaised(t *testing.T, pyErr string, err error) {
	t.Helper()
	var te *TemplateError
	want := strings.TrimPrefix(pyErr, "TemplateError: ")
	if !errors.As(err, &te) || te.Msg != want {
		t.Fatalf("want TemplateError %q, got %v", want, err)
	}
}

// TestSnippetsMatchJinja2 renders small templates covering the constructs chat templates use.
func TestSnippetsMatchJinja2(t *testing.T) {
	var golden []snippetGolden
	loadJSON(t, filepath.Join("testdata", "snippets.golden.json"), &golden)
	if len(golden) < 40 {
		t.Fatalf("only %d snippets in golden file", len(golden))
	}
	for _, g := range golden {
		t.Run(g.Name, func(t *testing.T) {
			tpl, err := Parse(g.Src)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			out, err := tpl.Render(goldenConversations["system"], goldenVars)
			if want, ok := knownDivergences[g.Name]; ok {
				if want == "ERROR" {
					if err == nil {
						t.Fatalf("known divergence: want an error, rendered %q", out)
					}
					return
				}
				if err != nil || out != want {
					t.Fatalf("known divergence changed: got %q, %v; documented %q (jinja2: %q)", out, err, want, g.Out)
				}
				return
			}
			switch {
			case strings.HasPrefix(g.Error, "TemplateError: "):
				checkRaised(t, g.Error, err)
			case g.Error != "":
				t.Fatalf("golden has unexpected error %q", g.Error)
			case err != nil:
				t.Fatalf("render: %v", err)
			case out != g.Out:
				t.Errorf("mismatch\n got: %q\nwant: %q", out, g.Out)
			}
		})
	}
}

// TestTemplatesMatchJinja2 renders every fixture template for two conversations and compares
// with jinja2 byte for byte. Where jinja2 fails because it iterates tools=None or needs an
// undefined variable, gonja is lenient (None iterates as empty, undefined is empty); those must
// render and contain the conversation.
func TestTemplatesMatchJinja2(t *testing.T) {
	dir := templatesDir(t)
	var golden []templateGolden
	loadJSON(t, filepath.Join("testdata", "templates.golden.json"), &golden)
	if len(golden) < 2*17 {
		t.Fatalf("only %d template cases in golden file", len(golden))
	}
	exact := 0
	for _, g := range golden {
		t.Run(g.Template+"/"+g.Conversation, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(dir, g.Template))
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := Parse(string(src))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			out, err := tpl.Render(goldenConversations[g.Conversation], goldenVars)
			switch {
			case strings.HasPrefix(g.Error, "TemplateError: "):
				checkRaised(t, g.Error, err)
			case g.Error != "":
				if err != nil {
					t.Fatalf("render: %v (jinja2 failed too: %s)", err, g.Error)
				}
				for _, m := range goldenConversations[g.Conversation] {
					if !strings.Contains(out, m.Content) {
						t.Errorf("output lacks %q:\n%s", m.Content, out)
					}
				}
			case err != nil:
				t.Fatalf("render: %v", err)
			case out != g.Out:
				t.Errorf("mismatch\n got: %q\nwant: %q", out, g.Out)
			default:
				exact++
			}
		})
	}
	t.Logf("%d of %d template renders identical to jinja2", exact, len(golden))
}
