package reasoning

import "strings"

// harmonySplitter follows gpt-oss's harmony messages: a header (role, channel, recipient,
// content type) up to <|message|>, then the body up to <|end|> (or <|return|>, <|call|>).
// Headers are never shown. A reply that does not begin with harmony markup is all answer.
type harmonySplitter struct {
	inBody  bool
	toThink bool   // the current body is reasoning
	buf     string // header text so far, or a body's possible partial marker
	plain   bool   // the reply is not harmony: everything is answer
	wrote   Part   // whether each side has text yet (to separate a second message from the first)
	sep     bool   // the current body is a second message on its side: a blank line goes first
	carried int    // the start of buf is a header the prompt began, this many bytes
}

// maxHeader bounds a header: text that long without <|message|> is not harmony markup.
const maxHeader = 512

// bodyEnds end a message's body; <|start|> and <|channel|> also begin the next message in
// output that skipped the end marker.
var bodyEnds = []string{harmonyEnd, harmonyReturn, harmonyCall, harmonyStart, harmonyChannel}

// newHarmonySplitter starts where the prompt leaves off: the prompt's last message, usually
// the bare "<|start|>assistant" header, is replayed so that a prompt that already chose a
// channel is continued on it.
func newHarmonySplitter(prompt string) *harmonySplitter {
	s := &harmonySplitter{}
	if i := strings.LastIndex(prompt, harmonyStart); i >= 0 {
		s.Push(prompt[i:])
		s.wrote = Part{}
		if !s.inBody {
			s.carried = len(s.buf)
		}
	}
	return s
}

func (s *harmonySplitter) Push(text string) Part {
	var out Part
	s.buf += text
	for {
		if s.plain {
			out.Content += s.buf
			s.buf = ""
			return out
		}
		if !s.inBody {
			if !s.header() {
				return out
			}
			continue
		}
		at, which := firstMarker(s.buf, bodyEnds...)
		if at < 0 {
			keep := len(s.buf) - partialSuffix(s.buf, bodyEnds...)
			s.emit(&out, s.buf[:keep])
			s.buf = s.buf[keep:]
			return out
		}
		s.emit(&out, s.buf[:at])
		rest := s.buf[at:]
		if m := bodyEnds[which]; m != harmonyStart && m != harmonyChannel {
			rest = rest[len(m):]
		}
		s.inBody, s.buf = false, rest
	}
}

// header consumes a header from buf; false when it needs more text.
func (s *harmonySplitter) header() bool {
	t := strings.TrimLeft(s.buf[s.carried:], blank)
	if t == "" || strings.HasPrefix("<|", t) {
		return false
	}
	if !strings.HasPrefix(t, "<|") {
		// Not markup: the model answered without channels.
		s.plain, s.buf = true, s.buf[s.carried:]
		return true
	}
	i := strings.Index(s.buf, harmonyMessage)
	if i < 0 {
		if len(s.buf) > maxHeader {
			s.plain, s.buf = true, s.buf[s.carried:]
			return true
		}
		return false
	}
	s.toThink = isReasoningHeader(s.buf[:i])
	s.inBody, s.buf, s.carried = true, s.buf[i+len(harmonyMessage):], 0
	s.sep = *s.side() != ""
	return true
}

// isReasoningHeader says whether a message with this header is reasoning: the analysis
// channel, and tool calls (a recipient), which are not run here; final and commentary
// preambles are the answer. A header with no channel is the answer.
func isReasoningHeader(h string) bool {
	channel := ""
	if j := strings.LastIndex(h, harmonyChannel); j >= 0 {
		channel = h[j+len(harmonyChannel):]
		if k := strings.Index(channel, "<|"); k >= 0 {
			channel = channel[:k]
		}
		channel = strings.TrimSpace(channel)
		if k := strings.IndexAny(channel, blank); k >= 0 {
			channel = channel[:k]
		}
	}
	switch {
	case channel == "analysis":
		return true
	case strings.Contains(h, "to="):
		return true
	}
	return false
}

// side is the text written so far to the current body's side.
func (s *harmonySplitter) side() *string {
	if s.toThink {
		return &s.wrote.Reasoning
	}
	return &s.wrote.Content
}

// emit adds body text to its side, after a blank line when it begins a second message there.
func (s *harmonySplitter) emit(out *Part, text string) {
	if text == "" {
		return
	}
	if s.sep {
		text, s.sep = "\n\n"+text, false
	}
	if s.toThink {
		out.Reasoning += text
	} else {
		out.Content += text
	}
	side := s.side()
	*side = "x" // only emptiness is read
}

func (s *harmonySplitter) Flush() Part {
	var out Part
	if s.inBody || s.plain {
		s.emit(&out, s.buf)
	}
	s.buf = ""
	return out
}
