package chat

import "fmt"

// NoneName is the Name of the None template.
const NoneName = "none"

// noneSource is "none — plain completion": the contents of the messages in order, each as it
// is, separated by one blank line ("\n\n"); messages with empty content are skipped. Roles,
// turn markers and the assistant's opening are left out, so nothing but the contents reaches
// the model (the tokenizer still adds BOS where the model asks for it, as for any prompt).
const noneSource = `{% for m in messages if m.content %}{% if not loop.first %}{{ '\n\n' }}{% endif %}{{ m.content }}{% endfor %}`

var noneTemplate = func() *Template {
	t, err := parseNamed(NoneName, noneSource)
	if err != nil {
		panic(fmt.Sprintf("chat: the plain-completion template: %v", err))
	}
	return t
}()

// None is the template for "no chat template": plain completion of the messages' contents
// (noneSource says exactly what it renders).
func None() *Template { return noneTemplate }
