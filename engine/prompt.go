package engine

import (
	"strings"

	"nibble/engine/chat"
)

// EncodeChat renders a conversation with the model's chat template and
// tokenizes it (template special tokens parsed as tokens). BOS is added only
// when the model wants it and the template did not already write it.
func (m *Model) EncodeChat(msgs []chat.Message) ([]int32, error) {
	bos, eos := m.tokenText(m.Tok.BOS()), m.tokenText(m.Tok.EOS())
	text, err := m.Template.Render(msgs, chat.Vars{BOS: bos, EOS: eos, AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	ids := m.Tok.Encode(text, false, true)
	if m.Tok.AddBOS() && !(bos != "" && strings.HasPrefix(text, bos)) {
		ids = append([]int32{m.Tok.BOS()}, ids...)
	}
	return ids, nil
}

// EncodePrompt tokenizes raw text for completion, with BOS/EOS as the model
// asks and special-token text kept as plain text.
func (m *Model) EncodePrompt(text string) []int32 { return m.Tok.Encode(text, true, false) }

func (m *Model) tokenText(id int32) string {
	if id < 0 || int(id) >= m.Tok.VocabSize() {
		return ""
	}
	return string(m.Tok.Piece(id))
}
