package service

// The types of the app's model picker, downloads, context budget, history,
// settings and diagnostics, as the bound methods of app/desktop return
// them (the frontend's TypeScript types are generated from these).

// LocalModel is a GGUF file the picker lists: from the models folder, added
// from elsewhere (open dialog, dropped on the window), or the demo model.
type LocalModel struct {
	Path     string `json:"path"`
	Name     string `json:"name"`
	Source   string `json:"source"` // folder, added or demo
	Arch     string `json:"arch"`
	FileType string `json:"fileType"` // e.g. Q4_0
	Size     int64  `json:"size"`     // file size in bytes
	Params   int64  `json:"params"`   // parameter count (0: unknown)
	CtxTrain int    `json:"ctxTrain"`
	Loaded   bool   `json:"loaded"`
	Demo     bool   `json:"demo"`
	// TokPerSec is the decode speed to expect here at the settings'
	// context and KV type, from the header (0: no figure; SpeedNote says
	// why, or how the figure was reached).
	TokPerSec float64 `json:"tokPerSec"`
	SpeedNote string  `json:"speedNote,omitempty"`
	// Problem says why this file cannot be loaded (not a GGUF file, cut
	// short, an architecture Nibble has no forward pass for); "" if none.
	Problem string `json:"problem,omitempty"`
}

// LoadRequest asks to load Path with a context budget and KV type (0 and
// "": the settings' values). The estimate is checked first: a load that
// will not fit is refused before anything is allocated.
type LoadRequest struct {
	Path string `json:"path"`
	Ctx  int    `json:"ctx"`
	KV   string `json:"kv"`

	// keepRemote: the load at start-up, after which chats still go to
	// the remote model if one is chosen (any other load makes the local
	// model the one chats go to).
	keepRemote bool
}

// KVLimit is the largest context that fits this machine with one KV type.
type KVLimit struct {
	KV     string `json:"kv"`
	MaxCtx int    `json:"maxCtx"` // 0: not even a small context fits
	Bytes  int64  `json:"bytes"`  // the KV cache at the context asked for
}

// CatalogEntry is one model of the catalog (models/) with its downloads.
type CatalogEntry struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Family   string        `json:"family"`
	ParamsB  float64       `json:"paramsB"`
	CtxTrain int           `json:"ctxTrain"`
	Note     string        `json:"note,omitempty"`
	Runnable bool          `json:"runnable"` // Nibble has its forward pass
	Files    []CatalogFile `json:"files"`
}

// CatalogFile is one quantization of a catalog entry, with its estimate on
// this machine at the context and KV type the settings ask for (from the
// listed size until CatalogEstimate reads the header).
type CatalogFile struct {
	Quant      string   `json:"quant"`
	FileName   string   `json:"fileName"`
	URL        string   `json:"url"`
	Size       int64    `json:"size"`
	SizeApprox bool     `json:"sizeApprox"`
	SHA256     string   `json:"sha256,omitempty"`
	Estimate   Estimate `json:"estimate"`
	// LocalPath is where the file is once downloaded ("" until then).
	LocalPath string `json:"localPath,omitempty"`
	// Partial is how many bytes an interrupted download kept (resumable).
	Partial  int64     `json:"partial,omitempty"`
	Download *Download `json:"download,omitempty"` // the running or last download
}

// Download is the state of one catalog download (event download:progress).
type Download struct {
	Key      string  `json:"key"` // "<catalog id>/<quant>"
	ID       string  `json:"id"`
	Quant    string  `json:"quant"`
	FileName string  `json:"fileName"`
	State    string  `json:"state"` // starting, downloading, verifying, done, failed, cancelled
	Done     int64   `json:"done"`
	Total    int64   `json:"total"` // -1 until known
	Speed    float64 `json:"speed"` // bytes per second
	ETASec   float64 `json:"etaSec"`
	Error    string  `json:"error,omitempty"`
	Path     string  `json:"path,omitempty"` // the file, once done
}

// SendResult is what Send returns: the reply's id (its events carry it)
// and the conversation it is kept in.
type SendResult struct {
	ReplyID        string `json:"replyId"`
	ConversationID int64  `json:"conversationId"`
	// Sources are the numbered sources of a question about documents, and
	// Documents say per document whether it went in whole or which parts.
	Sources   []Source      `json:"sources,omitempty"`
	Documents []DocumentUse `json:"documents,omitempty"`
}

// ConversationSummary is one row of the History pane.
type ConversationSummary struct {
	ID        int64  `json:"id"`
	Title     string `json:"title"`
	Model     string `json:"model"`
	UpdatedAt string `json:"updatedAt"` // RFC 3339
	Messages  int    `json:"messages"`
	Snippet   string `json:"snippet"`
}

// StoredMessage is one turn of a kept conversation.
type StoredMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Stats of an assistant reply (nil for other turns).
	Stats *ReplyStats `json:"stats,omitempty"`
	// Sources of an answer about documents: their number, document and
	// where (Source's other fields are not kept).
	Sources []Source `json:"sources,omitempty"`
	// Reasoning is a reasoning model's thinking before the answer.
	Reasoning string `json:"reasoning,omitempty"`
}

// ReplyStats are what is kept of a reply's final event.
type ReplyStats struct {
	FinishReason     string  `json:"finishReason"`
	ThinkingMs       float64 `json:"thinkingMs,omitempty"`
	PromptTokens     int     `json:"promptTokens"`
	GenTokens        int     `json:"genTokens"`
	TTFTMs           float64 `json:"ttftMs"`
	PrefillTokPerSec float64 `json:"prefillTokPerSec"`
	DecodeTokPerSec  float64 `json:"decodeTokPerSec"`
}

// Conversation is a kept conversation, restored whole.
type Conversation struct {
	ID       int64           `json:"id"`
	Title    string          `json:"title"`
	Model    string          `json:"model"`
	Messages []StoredMessage `json:"messages"`
	// Documents are the documents the conversation kept, attached again
	// (OpenConversation only): the chips of the reopened chat.
	Documents []DocumentInfo `json:"documents,omitempty"`
	// DocumentsNotKept names documents its last answer cites that were
	// not kept with it (a conversation from before documents were kept):
	// they must be attached again to be asked about.
	DocumentsNotKept []string `json:"documentsNotKept,omitempty"`
}

// Diagnostics is what the Diagnostics pane shows.
type Diagnostics struct {
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	Device       string `json:"device"` // CPU model, or the GPU on a Mac
	CPUs         int    `json:"cpus"`
	Threads      int    `json:"threads"` // engine threads in use
	TotalRAM     int64  `json:"totalRam"`
	AvailableRAM int64  `json:"availableRam"`
	Budget       int64  `json:"budget"`
	// BudgetSource says where the budget came from (available memory,
	// the GPU wired limit, the user's limit in Settings).
	BudgetSource    string `json:"budgetSource"`
	WiredLimitMB    int64  `json:"wiredLimitMb"` // macOS iogpu.wired_limit_mb (0: default or not macOS)
	Backend         string `json:"backend"`
	BackendReason   string `json:"backendReason"`
	Version         string `json:"version"`
	GoVersion       string `json:"goVersion"`
	WailsVersion    string `json:"wailsVersion"`
	Model           *Model `json:"model,omitempty"`
	TemplateStatus  string `json:"templateStatus"`
	DataDir         string `json:"dataDir"`
	ConfigDir       string `json:"configDir"`
	ModelsDir       string `json:"modelsDir"`
	SettingsWarning string `json:"settingsWarning,omitempty"`
	// ChatTarget says where chat requests go: the local model or a
	// remote endpoint's URL (never its key).
	ChatTarget string `json:"chatTarget"`
}
