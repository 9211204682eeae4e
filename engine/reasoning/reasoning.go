// Package reasoning separates a reasoning model's thinking from its answer as the text streams.
//
// Two conventions are understood, chosen from the model's chat template (else its family):
//
//   - Think: Qwen3, QwQ and DeepSeek-R1 write their reasoning between <think> and </think>
//     before the answer. Some templates open the block in the prompt (DeepSeek-R1's generation
//     prompt ends in "<think>\n"), so the reply starts inside it; Qwen3's template with
//     enable_thinking=false writes an empty block in the prompt, so the reply is all answer.
//   - Harmony: gpt-oss writes messages on channels (OpenAI's harmony format):
//     <|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…
//     The analysis channel is the reasoning, final the answer; commentary is a preamble to the
//     user, or a tool call when it names a recipient (" to=functions.x"), which this engine does
//     not run, so its text is kept with the reasoning rather than shown as the answer.
//
// The split is what llama-server returns as reasoning_content beside content.
package reasoning

import "strings"

// Format is how a model marks its reasoning.
type Format uint8

const (
	// None: the reply is all answer.
	None Format = iota
	// Think: <think>…</think> before the answer.
	Think
	// Harmony: gpt-oss's channels.
	Harmony
)

func (f Format) String() string {
	switch f {
	case Think:
		return "think"
	case Harmony:
		return "harmony"
	}
	return "none"
}

// Markers of the two formats, as the tokenizer renders their tokens.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"

	harmonyStart     = "<|start|>"
	harmonyChannel   = "<|channel|>"
	harmonyMessage   = "<|message|>"
	harmonyEnd       = "<|end|>"
	harmonyReturn    = "<|return|>"
	harmonyCall      = "<|call|>"
	harmonyConstrain = "<|constrain|>"
)

// Detect chooses the format from a chat template's source, else from the model's family
// (its GGUF general.architecture) when the template says nothing.
func Detect(templateSource, arch string) Format {
	switch {
	case strings.Contains(templateSource, harmonyChannel):
		return Harmony
	case strings.Contains(templateSource, thinkClose):
		return Think
	}
	switch arch {
	case "gpt-oss":
		return Harmony
	case "qwen3", "qwen3moe":
		return Think
	}
	return None
}

// Control is how a template lets the caller turn reasoning down or off.
type Control uint8

const (
	// NoControl: the template has no switch; the model thinks or not on its own.
	NoControl Control = iota
	// EnableThinking: the template reads enable_thinking (Qwen3): false turns thinking off.
	EnableThinking
	// ReasoningEffort: the template reads reasoning_effort (gpt-oss): low, medium or high.
	ReasoningEffort
)

func (c Control) String() string {
	switch c {
	case EnableThinking:
		return "enable_thinking"
	case ReasoningEffort:
		return "reasoning_effort"
	}
	return ""
}

// ControlOf says which switch a chat template reads.
func ControlOf(templateSource string) Control {
	switch {
	case strings.Contains(templateSource, "enable_thinking"):
		return EnableThinking
	case strings.Contains(templateSource, "reasoning_effort"):
		return ReasoningEffort
	}
	return NoControl
}

// Efforts are the reasoning_effort values gpt-oss's template accepts, least first.
var Efforts = []string{"low", "medium", "high"}

// ValidEffort reports whether e is one of Efforts ("" is not).
func ValidEffort(e string) bool {
	for _, x := range Efforts {
		if e == x {
			return true
		}
	}
	return false
}

// Part is what one Push or Flush separated: thinking and answer text, either possibly empty.
type Part struct {
	Reasoning, Content string
}

// Splitter splits one reply's streamed text. Text that might be the start of a marker split
// across tokens is held back until the next Push or Flush decides it. Not safe for concurrent
// use.
type Splitter interface {
	// Push takes the next piece of the reply and returns what it settled.
	Push(text string) Part
	// Flush ends the reply, returning whatever was held back.
	Flush() Part
}

// New returns the splitter of format f for a reply to prompt (the rendered prompt text,
// whose tail may open a think block or a harmony message).
func New(f Format, prompt string) Splitter {
	switch f {
	case Think:
		return newThinkSplitter(StartsInThink(prompt))
	case Harmony:
		return newHarmonySplitter(prompt)
	}
	return plain{}
}

// Split runs a whole reply through a splitter of format f (for text that did not stream).
func Split(f Format, prompt, reply string) Part {
	s := New(f, prompt)
	p := s.Push(reply)
	q := s.Flush()
	return Part{Reasoning: p.Reasoning + q.Reasoning, Content: p.Content + q.Content}
}

// StartsInThink reports whether a rendered prompt leaves a think block open, so the reply
// begins with reasoning: its last <think> comes after its last </think> and only blank space
// follows it.
func StartsInThink(prompt string) bool {
	open := strings.LastIndex(prompt, thinkOpen)
	if open < 0 || strings.LastIndex(prompt, thinkClose) > open {
		return false
	}
	return strings.TrimSpace(prompt[open+len(thinkOpen):]) == ""
}

type plain struct{}

func (plain) Push(text string) Part { return Part{Content: text} }
func (plain) Flush() Part           { return Part{} }

// partialSuffix is the length of the longest proper suffix of s that is a prefix of one of
// markers: text that a later piece may complete into a marker.
func partialSuffix(s string, markers ...string) int {
	best := 0
	for _, m := range markers {
		for n := min(len(m)-1, len(s)); n > best; n-- {
			if strings.HasSuffix(s, m[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

// firstMarker finds the earliest of markers in s: its index and which one (-1 when none).
func firstMarker(s string, markers ...string) (at, which int) {
	at, which = -1, -1
	for i, m := range markers {
		if j := strings.Index(s, m); j >= 0 && (at < 0 || j < at) {
			at, which = j, i
		}
	}
	return at, which
}
