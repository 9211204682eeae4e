package chat

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/parser"
)

// Problem is a template's parse or render error as a person reads it: what went wrong, and
// where in the template's source when gonja says (Line and Column count from 1; 0 when
// unknown).
type Problem struct {
	Message string
	Line    int
	Column  int
}

// renderLine finds the line gonja names in a render error ("... at line 3: ...").
var renderLine = regexp.MustCompile(`at line (\d+)`)

// Explain turns an error of Parse, ParseCustom or Render into a Problem. gonja's parse error
// quotes the whole template, and its render error nests every enclosing expression; both are
// cut down to the cause.
func Explain(err error) Problem {
	if err == nil {
		return Problem{}
	}
	var raised *TemplateError
	if errors.As(err, &raised) {
		return Problem{Message: "the template raised an exception: " + raised.Msg}
	}
	var syntax *parser.SyntaxError
	if errors.As(err, &syntax) {
		p := Problem{Message: syntax.Message, Line: syntax.Line, Column: syntax.Column}
		if syntax.Raw != "" {
			p.Message += ` (near "` + syntax.Raw + `")`
		}
		if p.Line <= 0 {
			p.Line, p.Column = 0, 0
		}
		return p
	}
	msg := err.Error()
	// The cause is the last part of gonja's chain "context: context: cause".
	cause := msg
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		cause = msg[i+2:]
	}
	p := Problem{Message: cause}
	if m := renderLine.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
	}
	// Errors that are ours (limits, the guards) name their own context.
	for _, prefix := range []string{"parse chat template " + CustomName + ": ", "parse chat template gguf: "} {
		if strings.HasPrefix(msg, prefix) && !strings.Contains(msg, "failed to parse template '") {
			p.Message = strings.TrimPrefix(msg, prefix)
		}
	}
	return p
}

// String is the problem in one line, with its place when known.
func (p Problem) String() string {
	switch {
	case p.Line > 0 && p.Column > 0:
		return "line " + strconv.Itoa(p.Line) + ", column " + strconv.Itoa(p.Column) + ": " + p.Message
	case p.Line > 0:
		return "line " + strconv.Itoa(p.Line) + ": " + p.Message
	}
	return p.Message
}
