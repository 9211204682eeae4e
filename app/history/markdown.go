package history

import (
	"fmt"
	"strings"
	"time"
)

// roleHeadings label messages in the export.
var roleHeadings = map[Role]string{
	RoleSystem:    "System",
	RoleUser:      "User",
	RoleAssistant: "Assistant",
}

// ExportMarkdown renders conversation convID as Markdown: the title as the
// heading, then each message under its role with its content verbatim, so
// code fences and other Markdown in replies render as they did in the app.
func (s *Store) ExportMarkdown(convID int64) (string, error) {
	c, err := s.Get(convID)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	return renderMarkdown(c), nil
}

func renderMarkdown(c Conversation) string {
	var b strings.Builder
	title := c.Title
	if title == "" {
		title = "Untitled conversation"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	if c.Model != "" {
		fmt.Fprintf(&b, "Model: %s · ", c.Model)
	}
	fmt.Fprintf(&b, "%s\n", c.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"))
	for _, m := range c.Messages {
		fmt.Fprintf(&b, "\n## %s\n\n", roleHeadings[m.Role])
		if m.Content != "" {
			b.WriteString(m.Content)
			if !strings.HasSuffix(m.Content, "\n") {
				b.WriteByte('\n')
			}
			// A reply cut off inside a code block (cancelled, length limit)
			// would swallow every later heading; close it after the verbatim
			// content.
			if fence := openFence(m.Content); fence != "" {
				b.WriteString(fence + "\n")
			}
		}
		if m.Stats != nil {
			fmt.Fprintf(&b, "\n*%s*\n", statsLine(m.Stats))
		}
		if len(m.Sources) > 0 {
			refs := make([]string, len(m.Sources))
			for i, src := range m.Sources {
				refs[i] = fmt.Sprintf("[%d] %s, %s", src.Number, src.Document, src.Label)
			}
			fmt.Fprintf(&b, "\nSources: %s\n", strings.Join(refs, "; "))
		}
	}
	return b.String()
}

func statsLine(st *Stats) string {
	parts := []string{
		fmt.Sprintf("%d tokens", st.Tokens),
		fmt.Sprintf("%.1f tok/s", st.TokensPerSec),
		"first token " + st.TTFT.Round(time.Millisecond).String(),
	}
	if st.FinishReason != "" {
		parts = append(parts, "finish: "+st.FinishReason)
	}
	return strings.Join(parts, " · ")
}

// openFence returns the fence that closes a CommonMark fenced code block
// left open at the end of md, or "" when every block is closed. It follows
// the fence rules (up to 3 spaces of indent, 3+ backticks or tildes, a
// closer of the same character at least as long) but not container blocks:
// fences inside lists or quotes end with their container anyway.
func openFence(md string) string {
	var open string // the opening fence run, e.g. "````"
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\r\n")
		run, rest, ok := fenceRun(line)
		if !ok {
			continue
		}
		if open == "" {
			// A backtick fence's info string may not contain backticks.
			if run[0] == '`' && strings.Contains(rest, "`") {
				continue
			}
			open = run
			continue
		}
		if run[0] == open[0] && len(run) >= len(open) && strings.TrimLeft(rest, " \t") == "" {
			open = ""
		}
	}
	return open
}

// fenceRun splits a line that starts (after at most 3 spaces) with 3 or
// more backticks or tildes into that run and the rest.
func fenceRun(line string) (run, rest string, ok bool) {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	if indent > 3 {
		return "", "", false
	}
	line = line[indent:]
	if line == "" || (line[0] != '`' && line[0] != '~') {
		return "", "", false
	}
	n := len(line) - len(strings.TrimLeft(line, line[:1]))
	if n < 3 {
		return "", "", false
	}
	return line[:n], line[n:], true
}
