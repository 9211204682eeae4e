package extract

import (
	"errors"
	"strings"
	"testing"
	"time"

	"nibble/app/documents"
	"nibble/app/documents/internal/doctest"
)

func TestExtractHTML(t *testing.T) {
	page := `<!DOCTYPE html>
<html><head>
  <title>Release  notes</title>
  <meta name="description" content="not visible">
  <style>body { color: red }</style>
  <script>var secret = "not visible";</script>
</head>
<body>
  <nav>Home | About</nav>
  <h1>Version 2.0</h1>
  <p>This release is   <b>faster</b> and
     <a href="#">safer</a>.<br>New line here.</p>
  <noscript>Enable JavaScript</noscript>
  <template><p>template text</p></template>
  <h2>Changes</h2>
  <ul>
    <li>Quicker start</li>
    <li>Fewer bugs
      <ol start="3"><li>nested three</li><li>nested four</li></ol>
    </li>
  </ul>
  <table>
    <tr><th>Name</th><th>Value</th></tr>
    <tr><td>speed</td><td>2&times;</td></tr>
  </table>
  <pre>
line one
  indented line</pre>
  <p>Caf&eacute; &amp; &lt;tags&gt;</p>
  <svg><text>svg text</text></svg>
</body></html>`
	doc := mustExtract(t, "notes.html", []byte(page))
	want := `Home | About

# Version 2.0

This release is faster and safer.
New line here.

## Changes

- Quicker start
- Fewer bugs
  3. nested three
  4. nested four

Name | Value
speed | 2×

line one
  indented line

Café & <tags>`
	if doc.Text != want {
		t.Errorf("text:\n%s\n--- want:\n%s", doc.Text, want)
	}
	if doc.Title != "Release notes" {
		t.Errorf("title %q", doc.Title)
	}
	for _, hidden := range []string{"secret", "color", "description", "JavaScript", "template text", "svg text"} {
		if strings.Contains(doc.Text, hidden) {
			t.Errorf("invisible %q in the text", hidden)
		}
	}
}

func TestExtractHTMLHeadWithoutEndTag(t *testing.T) {
	doc := mustExtract(t, "x.htm", []byte("<html><head><title>T</title><p>Body text"))
	if doc.Text != "Body text" {
		t.Errorf("text %q", doc.Text)
	}
}

func TestExtractHTMLCharset(t *testing.T) {
	page := []byte("<html><head><meta charset=\"windows-1252\"></head><body><p>caf\xe9 \x93ok\x94</p></body></html>")
	doc := mustExtract(t, "legacy.html", page)
	if doc.Text != "café “ok”" || !doctest.HasWarning(doc, "windows-1252") {
		t.Errorf("text %q warnings %q", doc.Text, doc.Warnings)
	}
}

// TestExtractHTMLDeepNesting: 100000 nested elements (and unclosed ones)
// take neither stack nor much time.
func TestExtractHTMLDeepNesting(t *testing.T) {
	const depth = 100000
	for name, page := range map[string]string{
		"closed":   strings.Repeat("<div>", depth) + "deep text" + strings.Repeat("</div>", depth),
		"unclosed": strings.Repeat("<div><span><b>", depth) + "deep text",
		"lists":    strings.Repeat("<ul><li>", depth) + "deep text",
		"scripts":  strings.Repeat("<noscript>", depth) + "hidden" + strings.Repeat("</noscript>", depth) + "shown",
	} {
		start := time.Now()
		doc, err := Bytes(name+".html", []byte(page), documents.Limits{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("%s: took %v", name, time.Since(start))
		}
		want := "deep text"
		if name == "scripts" {
			want = "shown"
		}
		if !strings.Contains(doc.Text, want) || strings.Contains(doc.Text, "hidden") {
			t.Errorf("%s: text %.80q", name, doc.Text)
		}
	}
}

func TestExtractHTMLLimits(t *testing.T) {
	page := "<p>" + strings.Repeat("word ", 100) + "</p>"
	if _, err := Bytes("x.html", []byte(page), documents.Limits{MaxTextBytes: 100}); !errors.Is(err, documents.ErrTooLarge) {
		t.Errorf("over the text limit: %v", err)
	}
	if _, err := Bytes("x.html", []byte("<p>\x00\x01binary</p>"), documents.Limits{}); !errors.Is(err, documents.ErrBinary) {
		t.Errorf("NUL bytes: %v", err)
	}
	// A page with nothing to read is refused as empty, not attached blank.
	if _, err := Bytes("empty.html", []byte("<html><script>only()</script></html>"), documents.Limits{}); !errors.Is(err, documents.ErrEmpty) || !strings.Contains(err.Error(), "no visible text") {
		t.Errorf("a page without visible text: %v, want documents.ErrEmpty", err)
	}
}
