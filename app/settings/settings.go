// Package settings is where Nibble keeps its files (Dirs) and the user's
// settings: a versioned settings.json that is replaced atomically, and whose
// damaged or unreadable versions are moved aside or left alone, never
// overwritten.
package settings

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"nibble/engine/sample"
)

// SchemaVersion is the version Save writes. Raise it, and add a step to
// migrations, whenever a field changes meaning or name; added fields need
// neither (absent ones take their defaults).
const SchemaVersion = 2

// Placeholder is where a quick action's prompt template receives the text.
const Placeholder = "{{text}}"

// Limits Validate enforces.
const (
	MinContext = 512
	MaxContext = 1 << 20 // above the longest supported model (Qwen2.5-1M); more is a typo
	MaxSlots   = 16      // each slot may hold a context's worth of KV cache
	MaxThreads = 1024
)

// DefaultMaxReplyTokens is the longest reply of a fresh install: long
// answers fit, and a model that never ends its turn stops within a minute
// or two instead of running to the end of a long context.
const DefaultMaxReplyTokens = 2048

// DefaultServerAddress is where the OpenAI-compatible server listens when
// enabled: Ollama's port plus one, so both can run.
const DefaultServerAddress = "127.0.0.1:11435"

// Settings is the content of settings.json. The JSON names are the file
// format; Validate's errors use them too.
type Settings struct {
	Version       int           `json:"version"`
	LastModel     string        `json:"lastModel"`     // path of the GGUF file loaded last; "" = none
	ContextTokens int           `json:"contextTokens"` // context budget
	KVType        string        `json:"kvType"`        // "auto", "q4", "q8" or "f16"
	Sampling      Sampling      `json:"sampling"`
	SystemPrompt  string        `json:"systemPrompt"` // "" = the model's own default
	Theme         string        `json:"theme"`        // "system", "light" or "dark"
	StartAtLogin  bool          `json:"startAtLogin"`
	Hotkey        string        `json:"hotkey"` // e.g. "cmd+shift+space"; "" = no global hotkey
	Server        Server        `json:"server"`
	Slots         int           `json:"slots"`   // requests that run at once
	Threads       int           `json:"threads"` // CPU threads; 0 = auto
	QuickActions  []QuickAction `json:"quickActions"`
	// MemoryLimit caps the memory a model may use, in bytes (0: the
	// machine's own budget), like LM Studio's custom guardrail.
	MemoryLimit int64 `json:"memoryLimit"`
	// ModelFiles are GGUF files outside the models folder that the user
	// added to the picker (open dialog, dropped on the window).
	ModelFiles []string `json:"modelFiles"`
	// RemoteEndpoints are OpenAI-compatible servers the model picker can
	// use (remote.go); ActiveRemote names the one chats go to ("": the
	// local model).
	RemoteEndpoints []RemoteEndpoint `json:"remoteEndpoints"`
	ActiveRemote    string           `json:"activeRemote"`
	// DocumentMaxBytes is the largest document that may be attached to a
	// chat: its file, and the text read from it (0: DefaultDocumentMaxBytes).
	DocumentMaxBytes int64 `json:"documentMaxBytes"`
	// WhenContextDoesNotFit is what a load whose context's KV cache does
	// not fit does: "refuse" (with advice), or "evict": load with an H2O
	// cache of the largest budget that fits, which keeps the most useful
	// tokens (docs/ARCHITECTURE.md, "Eviction (H2O)").
	WhenContextDoesNotFit string `json:"whenContextDoesNotFit"`
	// PromptTemplates are the chat templates the user chose per model
	// file, by the file's path: a Jinja template of their own, or none
	// (plain completion). A file without an entry uses its own template,
	// else a built-in one.
	PromptTemplates map[string]PromptTemplate `json:"promptTemplates,omitempty"`
	// MaxReplyTokens is the longest reply, in tokens, unless a chat asks
	// for another limit (0: no limit, until the context is full).
	MaxReplyTokens int `json:"maxReplyTokens"`
}

// Prompt template modes (PromptTemplate.Mode).
const (
	PromptTemplateCustom = "custom" // Source, a Jinja chat template
	PromptTemplateNone   = "none"   // no template: plain completion of the messages' contents
)

// MaxPromptTemplateBytes is the longest template kept (the chat package's
// parser limit).
const MaxPromptTemplateBytes = 256 << 10

// PromptTemplate is the chat template chosen for one model file.
type PromptTemplate struct {
	Mode   string `json:"mode"`             // PromptTemplateCustom or PromptTemplateNone
	Source string `json:"source,omitempty"` // the Jinja template of mode custom
}

// Sampling holds the sampler defaults (see engine/sample.Params).
type Sampling struct {
	Temperature   float32 `json:"temperature"` // 0 = greedy
	TopP          float32 `json:"topP"`        // 1 = off
	TopK          int     `json:"topK"`        // 0 = off
	MinP          float32 `json:"minP"`        // 0 = off
	RepeatPenalty float32 `json:"repeatPenalty"`
}

// Server is the local OpenAI-compatible server.
type Server struct {
	Enabled bool   `json:"enabled"`
	Address string `json:"address"` // loopback host:port
	// Token, when set, must come as "Authorization: Bearer <Token>".
	Token string `json:"token,omitempty"`
}

// QuickAction is a prompt run on the clipboard or the selection.
type QuickAction struct {
	Name   string `json:"name"`
	Prompt string `json:"prompt"` // contains Placeholder
}

// Render fills the template with text.
func (q QuickAction) Render(text string) string {
	return strings.ReplaceAll(q.Prompt, Placeholder, text)
}

// Defaults are the settings of a fresh install.
func Defaults() Settings {
	sp := sample.Defaults() // the engine's (llama.cpp's) defaults, so the app and CLI agree
	return Settings{
		Version:       SchemaVersion,
		ContextTokens: 4096,
		KVType:        "auto",
		Sampling: Sampling{
			Temperature:   sp.Temperature,
			TopP:          sp.TopP,
			TopK:          sp.TopK,
			MinP:          sp.MinP,
			RepeatPenalty: sp.RepeatPenalty,
		},
		Theme:      "system",
		Server:     Server{Address: DefaultServerAddress}, // off until the user turns it on
		Slots:      2,
		Threads:    0,
		ModelFiles: []string{},
		// No remote endpoint until the user adds one.
		RemoteEndpoints: []RemoteEndpoint{},
		// Documents' size limit.
		DocumentMaxBytes:      DefaultDocumentMaxBytes,
		WhenContextDoesNotFit: "refuse",
		MaxReplyTokens:        DefaultMaxReplyTokens,
		QuickActions: []QuickAction{
			{"Summarize", "Summarize the following text in a few sentences:\n\n" + Placeholder},
			{"Explain", "Explain the following in simple terms:\n\n" + Placeholder},
			{"Fix grammar", "Fix the grammar and spelling of the following text. Keep its meaning and tone, and reply with the corrected text only:\n\n" + Placeholder},
			{"Translate to English", "Translate the following text into English. Reply with the translation only:\n\n" + Placeholder},
			{"Draft a reply", "Draft a short, friendly reply to the following message:\n\n" + Placeholder},
		},
	}
}

// Params are the sampling settings as the engine takes them; the seed and
// the penalties the app does not expose keep the engine's defaults.
func (s Sampling) Params() sample.Params {
	p := sample.Defaults()
	p.Temperature, p.TopP, p.TopK, p.MinP, p.RepeatPenalty = s.Temperature, s.TopP, s.TopK, s.MinP, s.RepeatPenalty
	return p
}

// Clone returns a copy that shares nothing with s.
func (s Settings) Clone() Settings {
	s.QuickActions = slices.Clone(s.QuickActions)
	s.ModelFiles = slices.Clone(s.ModelFiles)
	s.RemoteEndpoints = slices.Clone(s.RemoteEndpoints)
	s.PromptTemplates = maps.Clone(s.PromptTemplates)
	if s.RemoteEndpoints == nil {
		s.RemoteEndpoints = []RemoteEndpoint{}
	}
	if s.ModelFiles == nil {
		// [] rather than null in JSON: the frontend iterates it.
		s.ModelFiles = []string{}
	}
	return s
}

// FieldError is one invalid field; Field is its JSON path, e.g.
// "sampling.temperature" or "quickActions[2].prompt".
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate returns nil, or every invalid field as a *FieldError joined with
// errors.Join.
func (s Settings) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{field, fmt.Sprintf(format, args...)})
	}
	// The comparisons are written so that NaN fails them.
	floatIn := func(field string, v, lo, hi float32, note string) {
		if !(v >= lo && v <= hi) {
			bad(field, "%v is out of range: want %v to %v%s", v, lo, hi, note)
		}
	}
	intIn := func(field string, v, lo, hi int, note string) {
		if v < lo || v > hi {
			bad(field, "%d is out of range: want %d to %d%s", v, lo, hi, note)
		}
	}

	if s.Version != SchemaVersion {
		bad("version", "%d, but this build writes version %d", s.Version, SchemaVersion)
	}
	if strings.ContainsRune(s.LastModel, 0) {
		bad("lastModel", "contains a NUL byte")
	}
	intIn("contextTokens", s.ContextTokens, MinContext, MaxContext, "")
	intIn("maxReplyTokens", s.MaxReplyTokens, 0, MaxContext, " (0 = no limit)")
	oneOf("kvType", s.KVType, []string{"auto", "q4", "q8", "f16"}, bad)

	floatIn("sampling.temperature", s.Sampling.Temperature, 0, 5, " (0 = greedy)")
	floatIn("sampling.topP", s.Sampling.TopP, 0, 1, " (1 = off)")
	if s.Sampling.TopK < 0 {
		bad("sampling.topK", "%d is negative (0 = off)", s.Sampling.TopK)
	}
	floatIn("sampling.minP", s.Sampling.MinP, 0, 1, " (0 = off)")
	if !(s.Sampling.RepeatPenalty > 0 && s.Sampling.RepeatPenalty <= 10) {
		bad("sampling.repeatPenalty", "%v is out of range: want more than 0, at most 10 (1 = off)", s.Sampling.RepeatPenalty)
	}

	oneOf("theme", s.Theme, []string{"system", "light", "dark"}, bad)
	oneOf("whenContextDoesNotFit", s.WhenContextDoesNotFit, []string{"refuse", "evict"}, bad)
	if err := checkHotkey(s.Hotkey); err != nil {
		bad("hotkey", "%q: %v", s.Hotkey, err)
	}
	if err := checkLoopback(s.Server.Address); err != nil {
		bad("server.address", "%q: %v", s.Server.Address, err)
	}
	if t := s.Server.Token; len(t) > 256 {
		bad("server.token", "%d bytes: at most 256", len(t))
	} else if strings.IndexFunc(t, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		bad("server.token", "contains a space or control character (clients send it in the Authorization header)")
	}
	intIn("slots", s.Slots, 1, MaxSlots, "")
	intIn("threads", s.Threads, 0, MaxThreads, " (0 = auto)")
	s.checkRemote(bad)
	s.checkDocuments(bad)
	if s.MemoryLimit < 0 {
		bad("memoryLimit", "%d is negative (0 = the machine's own budget)", s.MemoryLimit)
	}
	seen := map[string]int{}
	for i, p := range s.ModelFiles {
		field := fmt.Sprintf("modelFiles[%d]", i)
		switch {
		case strings.ContainsRune(p, 0):
			bad(field, "contains a NUL byte")
		case !filepath.IsAbs(p):
			bad(field, "%q is not an absolute path", p)
		default:
			if j, dup := seen[filepath.Clean(p)]; dup {
				bad(field, "%q is also modelFiles[%d]", p, j)
			} else {
				seen[filepath.Clean(p)] = i
			}
		}
	}

	s.checkPromptTemplates(bad)

	if n := len(s.QuickActions); n > MaxQuickActions {
		bad("quickActions", "%d actions: at most %d", n, MaxQuickActions)
	}
	names := map[string]int{}
	for i, q := range s.QuickActions {
		field := fmt.Sprintf("quickActions[%d]", i)
		name := strings.TrimSpace(q.Name)
		if name == "" {
			bad(field+".name", "is empty")
		} else if j, dup := names[strings.ToLower(name)]; dup {
			bad(field+".name", "%q is also the name of quickActions[%d]", q.Name, j)
		} else {
			names[strings.ToLower(name)] = i
		}
		if n := utf8.RuneCountInString(name); n > MaxQuickActionName {
			bad(field+".name", "%d characters: at most %d", n, MaxQuickActionName)
		}
		if strings.ContainsAny(q.Name, "\r\n\x00") {
			bad(field+".name", "must be one line")
		}
		if !strings.Contains(q.Prompt, Placeholder) {
			bad(field+".prompt", "has no %s placeholder for the text", Placeholder)
		}
	}
	return errors.Join(errs...)
}

func oneOf(field, v string, allowed []string, bad func(string, string, ...any)) {
	if !slices.Contains(allowed, v) {
		bad(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
}

// checkHotkey accepts "" (off) or a hotkey ParseHotkey reads.
func checkHotkey(h string) error {
	if h == "" {
		return nil
	}
	_, err := ParseHotkey(h)
	return err
}

// checkLoopback requires an IP literal on the loopback interface and a
// port: the server has no authentication, so it must not be reachable from
// the network. Host names are refused because "localhost" can be made to
// resolve elsewhere.
func checkLoopback(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("want a loopback address and port such as %s or [::1]:11435 (%v)", DefaultServerAddress, err)
	}
	if !ap.Addr().IsLoopback() {
		return fmt.Errorf("%s is not a loopback address (127.0.0.1 or ::1): the server must not be reachable from other machines", ap.Addr())
	}
	if ap.Port() == 0 {
		return errors.New("port 0: clients need a fixed port")
	}
	return nil
}

// Limits on quick actions: each is a line of the status item's menu.
const (
	MaxQuickActions    = 20
	MaxQuickActionName = 40 // characters
)

// Limits on the size of an attached document: its file and its text.
// 16 MiB of text is millions of tokens, answered from its most relevant
// parts; more takes long to read and count for little gain.
const (
	DefaultDocumentMaxBytes = 16 << 20
	MaxDocumentMaxBytes     = 1 << 30 // the file is read into memory, and its text kept there
)

// checkDocuments checks the documents' size limit.
func (s Settings) checkDocuments(bad func(field, format string, args ...any)) {
	if s.DocumentMaxBytes < 0 || s.DocumentMaxBytes > MaxDocumentMaxBytes {
		bad("documentMaxBytes", "%d is out of range: want 0 to %d bytes (1 GiB; 0 = %d MiB)",
			s.DocumentMaxBytes, MaxDocumentMaxBytes, DefaultDocumentMaxBytes>>20)
	}
}

// checkPromptTemplates checks the per-model templates' keys and modes;
// whether a custom template parses is the app's to check when it is saved.
func (s Settings) checkPromptTemplates(bad func(field, format string, args ...any)) {
	for _, path := range slices.Sorted(maps.Keys(s.PromptTemplates)) {
		t := s.PromptTemplates[path]
		field := fmt.Sprintf("promptTemplates[%q]", path)
		switch {
		case strings.ContainsRune(path, 0):
			bad(field, "the path contains a NUL byte")
		case !filepath.IsAbs(path):
			bad(field, "%q is not an absolute path", path)
		}
		switch t.Mode {
		case PromptTemplateCustom:
			if strings.TrimSpace(t.Source) == "" {
				bad(field+".source", "is empty: a custom template needs its text")
			} else if len(t.Source) > MaxPromptTemplateBytes {
				bad(field+".source", "%d bytes: at most %d", len(t.Source), MaxPromptTemplateBytes)
			}
		case PromptTemplateNone:
			if t.Source != "" {
				bad(field+".source", "is set, but mode none uses no template")
			}
		default:
			bad(field+".mode", "%q is not one of %s, %s", t.Mode, PromptTemplateCustom, PromptTemplateNone)
		}
	}
}
