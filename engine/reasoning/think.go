package reasoning

import "strings"

// thinkState is where a think splitter is in the reply.
type thinkState uint8

const (
	thinkBefore      thinkState = iota // only blank space so far: a <think> may still open
	thinkInside                        // between <think> and </think>
	thinkAnswerStart                   // after </think>: blank space before the answer is dropped
	thinkAnswer                        // the answer
)

// thinkSplitter splits <think>…</think> from the answer. Only a block at the start of the
// reply is reasoning (as in llama.cpp's parser): a <think> later in the answer is text. The
// blank space around the reasoning and before the answer is dropped, since the templates write
// "<think>\n…\n</think>\n\n".
type thinkSplitter struct {
	state   thinkState
	buf     string // held back: a possible partial marker, or trailing blank space
	started bool   // some reasoning was emitted (so blank space at its start is gone)
}

func newThinkSplitter(inside bool) *thinkSplitter {
	if inside {
		return &thinkSplitter{state: thinkInside}
	}
	return &thinkSplitter{}
}

const blank = " \t\r\n"

func (s *thinkSplitter) Push(text string) Part {
	var out Part
	s.buf += text
	for {
		switch s.state {
		case thinkBefore:
			t := strings.TrimLeft(s.buf, blank)
			switch {
			case t == "" || strings.HasPrefix(thinkOpen, t):
				return out // wait: blank, or a partial <think>
			case strings.HasPrefix(t, thinkOpen):
				s.state, s.buf = thinkInside, t[len(thinkOpen):]
			default:
				s.state, s.buf = thinkAnswer, t
			}
		case thinkInside:
			if i := strings.Index(s.buf, thinkClose); i >= 0 {
				out.Reasoning += s.reasoning(strings.TrimRight(s.buf[:i], blank))
				s.state, s.buf = thinkAnswerStart, s.buf[i+len(thinkClose):]
				continue
			}
			keep := len(s.buf) - partialSuffix(s.buf, thinkClose)
			settled := strings.TrimRight(s.buf[:keep], blank)
			out.Reasoning += s.reasoning(settled)
			s.buf = s.buf[len(settled):]
			return out
		case thinkAnswerStart:
			t := strings.TrimLeft(s.buf, blank)
			if t == "" {
				s.buf = ""
				return out
			}
			s.state, s.buf = thinkAnswer, t
		case thinkAnswer:
			out.Content += s.buf
			s.buf = ""
			return out
		}
	}
}

// reasoning emits settled reasoning text, dropping the blank space it starts with.
func (s *thinkSplitter) reasoning(text string) string {
	if !s.started {
		text = strings.TrimLeft(text, blank)
		s.started = text != ""
	}
	return text
}

func (s *thinkSplitter) Flush() Part {
	var out Part
	switch s.state {
	case thinkBefore:
		out.Content = strings.TrimLeft(s.buf, blank)
	case thinkInside:
		// The reply ended while thinking (a length limit): what was held is reasoning.
		out.Reasoning = s.reasoning(strings.TrimRight(s.buf, blank))
	case thinkAnswer:
		out.Content = s.buf
	}
	s.buf = ""
	return out
}
