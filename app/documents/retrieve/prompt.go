package retrieve

import (
	"fmt"
	"strings"

	"nibble/app/documents"
)

// promptInstructions open the system message. They do not depend on the
// question, so a plan that puts every document in whole gives the same
// system message for every question.
const promptInstructions = `You answer questions about the user's documents, which are given below as numbered sources.
Base your answer on the sources. Cite the sources you use by their numbers in square brackets, like [1] or [2][3].
If the sources do not contain the answer, say so instead of guessing.
Where a document is too large to include whole, only its listed parts are given; do not assume what the rest says.`

const sourceClose = "</source>"

// sourceOpen is the line that opens a numbered source.
func sourceOpen(n int, name, location string) string {
	return fmt.Sprintf(`<source id="%d" document="%s" location="%s">`, n, attrSafe(name), attrSafe(location))
}

// attrSafe keeps a name on one line and inside its quotes.
func attrSafe(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer(`"`, "'", "<", "‹", ">", "›").Replace(s)
}

// BuildPrompt writes the messages for plan: the system message holds the
// instructions, a status line per document and every source, delimited by
// <source id="N" ...> ... </source>, in citation order (whole documents and
// excerpts in document order); the user message is the question.
//
// Source text is included byte for byte, except that a "</source>" inside
// it is written "<\/source>" so that it cannot end the source early.
func BuildPrompt(docs []*documents.Document, plan *Plan, question string) Messages {
	var b strings.Builder
	b.WriteString(promptInstructions)
	b.WriteString("\n\nDocuments:\n")
	for _, dp := range plan.Documents {
		fmt.Fprintf(&b, "- %s: %s", attrSafe(dp.Name), dp.Status)
		switch len(dp.Sources) {
		case 0:
			b.WriteString(". None of it is included.\n")
		case 1:
			fmt.Fprintf(&b, ". Source [%d].\n", dp.Sources[0])
		default:
			refs := make([]string, len(dp.Sources))
			for i, n := range dp.Sources {
				refs[i] = fmt.Sprintf("[%d]", n)
			}
			fmt.Fprintf(&b, ". Sources %s.\n", strings.Join(refs, ", "))
		}
	}
	for _, c := range plan.Citations {
		if c.Document < 0 || c.Document >= len(docs) || docs[c.Document] == nil {
			continue
		}
		text := docs[c.Document].Text
		if c.Start < 0 || c.End > len(text) || c.Start > c.End {
			continue
		}
		b.WriteString("\n")
		loc := c.Label
		if c.Heading != "" && !c.Whole {
			loc += `, under "` + c.Heading + `"`
		}
		b.WriteString(sourceOpen(c.Number, c.Name, loc))
		b.WriteString("\n")
		b.WriteString(strings.ReplaceAll(text[c.Start:c.End], sourceClose, `<\/source>`))
		b.WriteString("\n")
		b.WriteString(sourceClose)
		b.WriteString("\n")
	}
	return Messages{System: b.String(), User: question}
}
