package service

import (
	"path/filepath"
	"time"

	"nibble/engine"
	"nibble/engine/scheduler"
)

// State is where the engine is in its start-up.
type State string

const (
	StateStarting  State = "starting"  // nothing tried yet
	StatePreparing State = "preparing" // synthesizing the demo model
	StateLoading   State = "loading"   // mapping a model
	StateReady     State = "ready"     // a model is loaded
	StateError     State = "error"     // the last start or load failed (Status.Error says why)
)

// Status is the engine as the app shows it.
type Status struct {
	State   State    `json:"state"`
	Error   string   `json:"error,omitempty"`
	Model   *Model   `json:"model,omitempty"` // nil when no model is loaded
	Busy    bool     `json:"busy"`            // a reply is running or waiting
	Running int      `json:"running"`         // replies running or waiting
	Prepare *Prepare `json:"prepare,omitempty"`
	// Remote is the remote model chats go to (nil: the local Model).
	Remote *Model `json:"remote,omitempty"`
	// Seq orders statuses: a later Status call has a larger one. Events
	// from several goroutines can reach the window out of order, so it
	// keeps the status with the largest Seq it has seen.
	Seq uint64 `json:"seq,omitempty"`
}

// Model describes the loaded model.
type Model struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Arch     string `json:"arch"`
	Backend  string `json:"backend"`
	Ctx      int    `json:"ctx"`      // context budget in force
	CtxTrain int    `json:"ctxTrain"` // the model's trained context
	KV       string `json:"kv"`       // KV cache type
	// KVLabel names the cache as the model's info shows it: "q4 KV
	// (rotated)", "q8 KV".
	KVLabel string `json:"kvLabel"`
	// KVCheck is the KV quality check of this model (KV setting auto).
	KVCheck  *KVCheck `json:"kvCheck,omitempty"`
	Slots    int      `json:"slots"`
	Template string   `json:"template"`
	// TemplateProblem says why the file's own chat template is not used.
	TemplateProblem string `json:"templateProblem,omitempty"`
	MemoryBytes     int64  `json:"memoryBytes"` // one session's estimated total
	// Demo: the synthesized demo model, whose random weights show the
	// machinery, not sensible text.
	Demo bool `json:"demo"`
	// Remote: an OpenAI-compatible endpoint's model (Path is
	// "remote:<name>"), at Host, asking for RemoteModel ("": the
	// server's default).
	Remote      bool   `json:"remote,omitempty"`
	Host        string `json:"host,omitempty"`
	RemoteModel string `json:"remoteModel,omitempty"`
	// Reasoning is how the model's chat template marks its thinking
	// ("think", "harmony"; "" for a model that does not think aloud), which
	// replies show apart from the answer. ThinkingControl is what the
	// per-chat switch sets: "enable_thinking" (on or off),
	// "reasoning_effort" (low, medium, high), or "" (no switch).
	Reasoning       string `json:"reasoning,omitempty"`
	ThinkingControl string `json:"thinkingControl,omitempty"`
}

func modelOf(info scheduler.ModelInfo) Model {
	name := info.Name
	if name == "" {
		name = filepath.Base(info.Path)
	}
	return Model{Name: name, Path: info.Path, Arch: info.Arch, Backend: info.Backend,
		Ctx: info.Options.Ctx, CtxTrain: info.CtxTrain, KV: info.Options.KV.String(), KVLabel: info.Options.KVLabel(), Slots: info.Slots,
		Template: info.Template, TemplateProblem: info.TemplateProblem, MemoryBytes: info.Estimate.Total,
		Reasoning: info.Reasoning, ThinkingControl: info.ThinkingControl}
}

// Prepare is the progress of making the demo model.
type Prepare struct {
	Label string `json:"label"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// SendRequest is a chat (Messages) or, when Messages is empty, a plain
// completion of Prompt.
type SendRequest struct {
	// ConversationID is the kept conversation this turn continues (0: a
	// new one, named after the first user message).
	ConversationID int64     `json:"conversationId"`
	Messages       []Message `json:"messages"`
	Prompt         string    `json:"prompt,omitempty"`
	// MaxTokens limits the reply: 0 takes the settings' maxReplyTokens,
	// NoReplyLimit lets it run until the model ends its turn or the
	// context is full. The demo model stops at DemoMaxTokens whatever
	// is asked.
	MaxTokens int `json:"maxTokens,omitempty"`
	// ReplaceLast: this turn replaces the conversation's last exchange
	// (its last question and the replies after it) in the history: a
	// reply regenerated, or the last question edited. Messages end with
	// the question, as sent again or edited.
	ReplaceLast bool `json:"replaceLast,omitempty"`
	// Documents are attached documents (AttachDocumentFile's ids) the last
	// user message asks about: they go into a system message, whole or by
	// their most relevant passages (documents.go).
	Documents []string `json:"documents,omitempty"`
	// Thinking is the chat's reasoning switch, for a model whose template
	// has one (Model.ThinkingControl): "" leaves the template's default
	// (thinking on), "off" turns it off (the lowest effort where the
	// template takes an effort), "low", "medium" or "high" set the
	// effort. Ignored for models without a switch.
	Thinking string `json:"thinking,omitempty"`
}

// Delta is streamed text of reply ID: answer text, and the model's
// thinking (Model.Reasoning) apart from it.
type Delta struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	Reasoning string `json:"reasoning,omitempty"`
}

// Progress is the prefill of reply ID: Prefilled of PromptTokens are in
// the cache.
type Progress struct {
	ID           string `json:"id"`
	Prefilled    int    `json:"prefilled"`
	PromptTokens int    `json:"promptTokens"`
}

// Final ends reply ID.
type Final struct {
	ID string `json:"id"`
	// FinishReason: stop, length, cancelled or error.
	FinishReason string `json:"finishReason"`
	Error        string `json:"error,omitempty"`
	Text         string `json:"text"`
	// Reasoning is the model's thinking before Text, the answer, and
	// ThinkingMs how long it took: from the first reasoning to the first
	// answer text (or the end).
	Reasoning    string  `json:"reasoning,omitempty"`
	ThinkingMs   float64 `json:"thinkingMs,omitempty"`
	PromptTokens int     `json:"promptTokens"`
	ReusedTokens int     `json:"reusedTokens"` // prompt tokens found in the cache
	// PrefillTokens are the prompt tokens computed (not found in the cache).
	PrefillTokens int `json:"prefillTokens"`
	GenTokens     int `json:"genTokens"`
	// TTFTMs is the time to first token in milliseconds, queue wait
	// included (0 when no token was generated).
	TTFTMs           float64 `json:"ttftMs"`
	PrefillTokPerSec float64 `json:"prefillTokPerSec"`
	DecodeTokPerSec  float64 `json:"decodeTokPerSec"`
	// MaxTokens is the reply limit it ran under (0: none). A reply that
	// ends with "length" short of it ran out of context.
	MaxTokens int `json:"maxTokens,omitempty"`
}

// finalOf is the final event of reply id, the one place it is built:
// from the reply's result, or, when the stream ended without one, a
// cancellation carrying shown, the text the window was sent.
func finalOf(id string, r *scheduler.Result, shown string) Final {
	if r == nil {
		return Final{ID: id, FinishReason: "cancelled", Text: shown}
	}
	f := Final{ID: id, FinishReason: string(r.FinishReason), Text: r.Text, Reasoning: r.Reasoning, PromptTokens: r.PromptTokens,
		ReusedTokens: r.ReusedTokens, PrefillTokens: r.PrefillTokens, GenTokens: r.GenTokens,
		TTFTMs:           millis(r.TimeToFirstToken),
		PrefillTokPerSec: r.PrefillTokPerSec, DecodeTokPerSec: r.DecodeTokPerSec}
	if r.Err != nil && r.FinishReason == engine.StopError {
		f.Error = r.Err.Error()
	}
	return f
}

// millis is d in milliseconds, to the microsecond, as the window shows
// durations.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
