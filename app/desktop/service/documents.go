package service

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"nibble/app/documents"
	"nibble/app/documents/extract"
	"nibble/app/documents/retrieve"
	"nibble/app/settings"
	"nibble/engine/scheduler"
)

// EventDocument reports an attached document's reading progress, and its
// end (ready or failed).
const EventDocument = "document:changed" // DocumentInfo

// Document states.
const (
	DocReading = "reading"
	DocReady   = "ready"
	DocError   = "error"
)

// DocumentInfo is an attached document as the tray shows it.
type DocumentInfo struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // text, markdown, code, html, pdf, docx, csv, json ("" until read)
	Language string `json:"language,omitempty"`
	Size     int64  `json:"size"` // the file's bytes
	State    string `json:"state"`
	// Stage and Progress (0 to 1) say how far reading is.
	Stage    string  `json:"stage,omitempty"`
	Progress float64 `json:"progress"`
	Error    string  `json:"error,omitempty"` // why it could not be read (state error)
	Pages    int     `json:"pages"`           // PDFs; 0 for other kinds
	Lines    int     `json:"lines"`
	// Tokens counts the text with the loaded model's tokenizer (0 when no
	// model is loaded).
	Tokens   int      `json:"tokens"`
	Warnings []string `json:"warnings,omitempty"`
	// Whole says whether the document goes into the prompt whole, with
	// the other documents asked about; Fit says so in words ("fits whole
	// in 4K context with q4 KV", "too large: answering from the most
	// relevant parts"). Both are set by Documents.
	Whole bool   `json:"whole"`
	Fit   string `json:"fit,omitempty"`
	// Note says what the user should know about a document reopened with
	// its conversation: its file changed or is gone since, so the answers
	// come from the copy kept with the conversation.
	Note string `json:"note,omitempty"`
}

// Source is one numbered source of an answer: a whole document or the
// part of one that went into the prompt.
type Source struct {
	Number     int    `json:"number"` // cited as [Number]
	DocumentID string `json:"documentId"`
	Document   string `json:"document"` // its name
	Whole      bool   `json:"whole"`
	// Label says where: "page 4", "lines 120–168", "whole document, pages 1–3".
	Label     string `json:"label"`
	FirstPage int    `json:"firstPage,omitempty"`
	LastPage  int    `json:"lastPage,omitempty"`
	FirstLine int    `json:"firstLine,omitempty"`
	LastLine  int    `json:"lastLine,omitempty"`
}

// DocumentUse is what one document contributed to a question: whole, or
// which parts.
type DocumentUse struct {
	DocumentID string `json:"documentId"`
	Name       string `json:"name"`
	Whole      bool   `json:"whole"`
	Sections   int    `json:"sections"` // passages it was cut into (1 when whole)
	Used       int    `json:"used"`     // passages in the prompt
	Status     string `json:"status"`
}

// docEntry is an attached document.
type docEntry struct {
	info DocumentInfo
	doc  *documents.Document // nil until read
	// path is the file it was read from ("" for bytes from the page);
	// fileSHA256 is the hex SHA-256 of the file's bytes, set once read.
	// The history keeps both with the text, to tell on reopening whether
	// the file changed.
	path       string
	fileSHA256 string
}

// docStore holds the attached documents (the window keeps which belong
// to its conversation) and the token counts of their texts, and plans
// what of them goes into a question's prompt.
type docStore struct {
	env
	engine localEngine   // the loaded model's tokenizer and context
	remote remoteCounter // the chosen remote model, counted approximately

	mu      sync.Mutex // guards entries, next, closed and the entries' fields
	entries map[string]*docEntry
	next    uint64
	closed  bool
	work    sync.WaitGroup // documents being read (docWork)

	countMu     sync.Mutex
	countsModel string // the model the counts are for
	counts      map[string]int
}

// remoteCounter is the remote part as the documents see it.
type remoteCounter interface {
	active() (settings.RemoteEndpoint, bool)
	tokenCounter(ep settings.RemoteEndpoint) (retrieve.TokenCounter, int, error)
}

// maxMemoEntries bounds the memo of token counts; past it, it starts over.
const maxMemoEntries = 200_000

// countPiece is how much text is counted at once while a document is
// read, so that progress can be reported.
const countPiece = 64 << 10

// tokenCounter counts tokens with the loaded model's tokenizer, and says
// the context budget in force. Counts of long texts are remembered per
// model: the plan counts every document again for every question.
func (d *docStore) tokenCounter() (retrieve.TokenCounter, int, error) {
	if ep, ok := d.remote.active(); ok {
		return d.remote.tokenCounter(ep) // approximate: no tokenizer for a remote model
	}
	sched := d.engine.engine()
	info, ok := sched.Info()
	if !ok {
		return nil, 0, scheduler.ErrNoModel
	}
	count := func(text string) int {
		if text == "" {
			return 0
		}
		memo := len(text) >= 32
		if memo {
			d.countMu.Lock()
			n, ok := d.countsLocked(info.Path)[text]
			d.countMu.Unlock()
			if ok {
				return n
			}
		}
		ids, err := sched.Tokenize(scheduler.Request{Prompt: text})
		n := len(ids) // the BOS a prompt starts with counts too: a little over, never under
		if err != nil {
			// The model went away meanwhile: an overestimate, and Send
			// fails with the real reason.
			n = len(text)/2 + 1
		} else if memo {
			d.countMu.Lock()
			if d.countsModel == info.Path && d.counts != nil {
				d.counts[text] = n
			}
			d.countMu.Unlock()
		}
		return n
	}
	return count, info.Options.Ctx, nil
}

// rememberCount records n as the token count of text for the model loaded
// now (a sum over pieces, counted with progress).
func (d *docStore) rememberCount(text string, n int) {
	if _, ok := d.remote.active(); ok {
		return // an approximate count, not the local model's
	}
	info, ok := d.engine.engine().Info()
	if !ok {
		return
	}
	d.countMu.Lock()
	d.countsLocked(info.Path)[text] = n
	d.countMu.Unlock()
}

// countsLocked is the memo of counts for the model at path, started over
// when the model changed or the memo grew past maxMemoEntries. countMu
// held.
func (d *docStore) countsLocked(path string) map[string]int {
	if d.countsModel != path || d.counts == nil || len(d.counts) > maxMemoEntries {
		d.countsModel, d.counts = path, map[string]int{}
	}
	return d.counts
}

// forgetCounts drops the remembered counts (they hold on to the texts).
func (d *docStore) forgetCounts() {
	d.countMu.Lock()
	d.counts = nil
	d.countMu.Unlock()
}

// documentLimits are the extraction limits: the settings' one size limit
// for a document's file and its text.
func (d *docStore) documentLimits() documents.Limits {
	limit := d.store.Get().DocumentMaxBytes
	if limit <= 0 {
		limit = settings.DefaultDocumentMaxBytes
	}
	return documents.UserLimits(limit)
}

// settingsLimitHint names where the document size limit is set; every
// refusal for size ends with it.
const settingsLimitHint = " (Settings › Largest document)"

// checkDocumentSize refuses a file of size bytes over the settings' limit
// before it is read. (Extraction refuses an empty one before reading too.)
func (d *docStore) checkDocumentSize(name string, size int64) error {
	if limit := d.documentLimits().MaxFile(); size > limit {
		return fmt.Errorf("%s: %s%s", name, documents.FileTooLarge(size, limit), settingsLimitHint)
	}
	return nil
}

// attachFile attaches the document at path (a file dropped on the
// window, in the app). It returns at once, in state reading; progress
// and the end come as EventDocument. A file that cannot be read gives a
// document in state error, with the reason.
func (d *docStore) attachFile(path string) (DocumentInfo, error) {
	if strings.TrimSpace(path) == "" {
		return DocumentInfo{}, errors.New("attach a document: no path")
	}
	if strings.ContainsRune(path, 0) || !filepath.IsAbs(path) {
		return DocumentInfo{}, fmt.Errorf("attach a document: %q is not an absolute path", path)
	}
	e := d.newEntry(filepath.Base(path), 0)
	d.mu.Lock()
	e.path = path
	d.mu.Unlock()
	d.docWork(func() {
		data, err := d.readDocumentFile(e, path)
		if err != nil {
			d.docFailed(e, err)
			return
		}
		d.extractDocument(e, data)
	})
	return d.docInfo(e), nil
}

// attachData attaches a document given as its name and bytes,
// base64-encoded (a file dropped on the page, whose path a browser does
// not give). Like attachFile, it returns at once.
func (d *docStore) attachData(name, dataBase64 string) (DocumentInfo, error) {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	if strings.TrimSpace(name) == "" || name == "." || name == "/" {
		return DocumentInfo{}, errors.New("attach a document: no file name")
	}
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "\uFFFD")
	}
	// The decoded size, less the padding: DecodedLen counts whole groups of 3 bytes.
	size := int64(base64.StdEncoding.DecodedLen(len(dataBase64)) - strings.Count(dataBase64[max(len(dataBase64)-2, 0):], "="))
	e := d.newEntry(name, size)
	if err := d.checkDocumentSize(name, size); err != nil {
		d.docFailed(e, err)
		return d.docInfo(e), nil
	}
	d.docWork(func() {
		data, err := base64.StdEncoding.DecodeString(dataBase64)
		if err != nil {
			d.docFailed(e, fmt.Errorf("%s: the page sent bytes that are not base64: %w", name, err))
			return
		}
		d.setDoc(e, func(i *DocumentInfo) { i.Size = int64(len(data)) })
		d.extractDocument(e, data)
	})
	return d.docInfo(e), nil
}

// close stops reporting on the documents being read (Close).
func (d *docStore) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
}

// docWork runs f off the caller's goroutine. Close does not wait for it
// (reading a large PDF cannot be interrupted, and nothing of it is kept);
// it reports nothing once the service is closed, and stops counting a
// document that was removed. work lets tests wait for it.
func (d *docStore) docWork(f func()) {
	d.work.Add(1)
	go func() {
		defer d.work.Done()
		f()
	}()
}

func (d *docStore) newEntry(name string, size int64) *docEntry {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.entries == nil {
		d.entries = map[string]*docEntry{}
	}
	d.next++
	e := &docEntry{info: DocumentInfo{ID: "d" + strconv.FormatUint(d.next, 10), Name: name, Size: size,
		State: DocReading, Stage: "reading the file"}}
	d.entries[e.info.ID] = e
	return e
}

func (d *docStore) docInfo(e *docEntry) DocumentInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := e.info
	i.Warnings = append([]string(nil), e.info.Warnings...)
	return i
}

// setDoc changes an entry's info and reports it.
func (d *docStore) setDoc(e *docEntry, f func(*DocumentInfo)) {
	d.mu.Lock()
	f(&e.info)
	d.mu.Unlock()
	if d.docAttached(e) {
		d.emit(EventDocument, d.docInfo(e))
	}
}

// docAttached says whether e is still attached (not removed) and the
// service still open.
func (d *docStore) docAttached(e *docEntry) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, attached := d.entries[e.info.ID]
	return attached && !d.closed
}

func (d *docStore) docFailed(e *docEntry, err error) {
	msg := documentError(err)
	if errors.Is(err, documents.ErrTooLarge) && !strings.HasSuffix(msg, settingsLimitHint) {
		msg += settingsLimitHint // the text grew past the limit the file was under
	}
	d.setDoc(e, func(i *DocumentInfo) {
		i.State, i.Stage, i.Progress, i.Error = DocError, "", 0, msg
	})
}

// documentError is err in words for the tray: the documents package's
// "documents: " prefix left out.
func documentError(err error) string {
	return strings.TrimPrefix(err.Error(), "documents: ")
}

// readDocumentFile reads path, reporting progress per MiB.
func (d *docStore) readDocumentFile(e *docEntry, path string) ([]byte, error) {
	name := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (a folder or a device cannot be attached)", name)
	}
	size := st.Size()
	d.setDoc(e, func(i *DocumentInfo) { i.Size = size })
	if err := d.checkDocumentSize(name, size); err != nil {
		return nil, err
	}
	data := make([]byte, size)
	const step = 1 << 20
	for off := int64(0); off < size; {
		n, err := f.ReadAt(data[off:min(off+step, size)], off)
		off += int64(n)
		if err != nil && !(errors.Is(err, io.EOF) && off == size) {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: the file shrank while it was read (%d of %d bytes)", name, off, size)
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if size > 4*step {
			done := off
			d.setDoc(e, func(i *DocumentInfo) { i.Progress = 0.3 * float64(done) / float64(size) })
		}
	}
	return data, nil
}

// extractDocument turns data into text and counts its tokens, with
// progress, then marks the entry ready (or failed).
func (d *docStore) extractDocument(e *docEntry, data []byte) {
	d.setDoc(e, func(i *DocumentInfo) { i.Stage, i.Progress = "extracting the text", 0.3 })
	sum := sha256.Sum256(data)
	d.mu.Lock()
	e.fileSHA256 = hex.EncodeToString(sum[:])
	d.mu.Unlock()
	doc, err := extract.Bytes(e.info.Name, data, d.documentLimits())
	if err != nil {
		d.docFailed(e, err)
		return
	}
	d.countDocument(e, doc)
}

// countDocument counts doc's tokens, with progress, then marks the entry
// ready with doc.
func (d *docStore) countDocument(e *docEntry, doc *documents.Document) {
	if !d.docAttached(e) {
		return // removed while it was read: counting it would be wasted
	}
	pages := len(doc.Pages)
	d.setDoc(e, func(i *DocumentInfo) {
		i.Kind, i.Language, i.Pages, i.Lines = string(doc.Kind), doc.Language, pages, doc.Lines()
		i.Warnings = doc.Warnings
		i.Stage, i.Progress = "counting tokens", 0.6
	})
	tokens := 0
	if count, _, err := d.tokenCounter(); err == nil {
		text := doc.Text
		for off := 0; off < len(text); {
			if !d.docAttached(e) {
				return // removed (a new chat) while it was counted
			}
			end := pieceEnd(text, off, countPiece)
			tokens += count(text[off:end])
			off = end
			if len(text) > 4*countPiece {
				done := off
				d.setDoc(e, func(i *DocumentInfo) { i.Progress = 0.6 + 0.4*float64(done)/float64(len(text)) })
			}
		}
		if !d.docAttached(e) {
			return // its text must not stay in the memo of counts
		}
		d.rememberCount(text, tokens)
	}
	d.setDoc(e, func(i *DocumentInfo) {
		e.doc = doc
		i.Tokens, i.State, i.Stage, i.Progress = tokens, DocReady, "", 1
	})
}

// pieceEnd is where a piece of text from off of about n bytes ends: at a
// line end when there is one in its second half, never inside a UTF-8
// sequence.
func pieceEnd(text string, off, n int) int {
	end := off + n
	if end >= len(text) {
		return len(text)
	}
	if nl := strings.LastIndexByte(text[off+n/2:end], '\n'); nl >= 0 {
		return off + n/2 + nl + 1
	}
	for end > off && !utf8.RuneStart(text[end]) {
		end--
	}
	return end
}

// remove detaches document id (unknown ids are ignored).
func (d *docStore) remove(id string) {
	d.mu.Lock()
	_, ok := d.entries[id]
	delete(d.entries, id)
	d.mu.Unlock()
	if ok {
		d.forgetCounts()
	}
}

// describe describes the documents ids, in that order, with whether each
// goes into a prompt whole when asked about together, on the model loaded
// now. Unknown ids are an error.
func (d *docStore) describe(ids []string) ([]DocumentInfo, error) {
	entries, err := d.entriesOf(ids)
	if err != nil {
		return nil, err
	}
	out := make([]DocumentInfo, len(entries))
	var ready []*documents.Document
	var readyAt []int
	for i, e := range entries {
		out[i] = d.docInfo(e)
		if out[i].State == DocReady {
			d.mu.Lock()
			ready = append(ready, e.doc)
			d.mu.Unlock()
			readyAt = append(readyAt, i)
		}
	}
	if len(ready) == 0 {
		return out, nil
	}
	count, ctx, err := d.tokenCounter()
	if err != nil {
		for _, i := range readyAt {
			out[i].Fit = "load a model to see whether it fits"
		}
		return out, nil
	}
	for k, i := range readyAt {
		out[i].Tokens = count(ready[k].Text)
	}
	plan, err := retrieve.PlanContext(retrieve.PlanRequest{Documents: ready, Count: count,
		ContextTokens: ctx, ReserveTokens: answerReserve(ctx, 0)})
	if err != nil {
		for _, i := range readyAt {
			out[i].Fit = documentError(err)
		}
		return out, nil
	}
	for k, i := range readyAt {
		dp := plan.Documents[k]
		out[i].Whole = dp.Whole
		if dp.Whole {
			out[i].Fit = d.wholeStatus(ctx)
		} else {
			out[i].Fit = "too large: answering from the most relevant parts"
		}
	}
	return out, nil
}

// wholeStatus is the status of a document that goes in whole: "fits
// whole in 4K context with q4 KV (rotated)".
func (d *docStore) wholeStatus(ctx int) string {
	st := "fits whole in " + contextWords(ctx) + " context"
	if _, ok := d.remote.active(); ok {
		return st + " of the remote model (counted approximately)"
	}
	if info, ok := d.engine.engine().Info(); ok {
		st += " with " + info.Options.KVLabel() // as the header names it
	}
	return st
}

// contextWords writes a context size as people say it: "4K", "1.5K", "900".
func contextWords(n int) string {
	switch {
	case n >= 1024 && n%1024 == 0:
		return fmt.Sprintf("%dK", n/1024)
	case n >= 1000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1024), ".0") + "K"
	}
	return strconv.Itoa(n)
}

func (d *docStore) entriesOf(ids []string) ([]*docEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*docEntry, 0, len(ids))
	for _, id := range ids {
		e, ok := d.entries[id]
		if !ok {
			return nil, fmt.Errorf("document %q is not attached (removed, or the app restarted): attach it again", id)
		}
		out = append(out, e)
	}
	return out, nil
}

// answerReserve is the part of the context kept for the answer: what was
// asked for, else a quarter of the context, at most 1024 tokens.
func answerReserve(ctx, maxTokens int) int {
	if maxTokens > 0 {
		return min(maxTokens, ctx/2)
	}
	return max(min(ctx/4, 1024), 1)
}

// docPlan is what the documents of one Send contributed.
type docPlan struct {
	sources []Source
	uses    []DocumentUse
}

// withDocuments puts the documents req.Documents into req: a system
// message with the documents (whole when they fit, else the passages that
// rank best for the question, the last user message), the conversation
// so far, and the question. A plan that takes every document whole gives
// the same system message for every question, so the engine reuses the
// documents' cached prefix for follow-ups.
func (d *docStore) withDocuments(req SendRequest) (SendRequest, *docPlan, error) {
	entries, err := d.entriesOf(req.Documents)
	if err != nil {
		return req, nil, err
	}
	docs := make([]*documents.Document, len(entries))
	for i, e := range entries {
		info := d.docInfo(e)
		switch info.State {
		case DocReading:
			return req, nil, fmt.Errorf("%s is still being read: ask again when its chip says how it fits", info.Name)
		case DocError:
			return req, nil, fmt.Errorf("%s could not be read (%s): remove it to ask without it", info.Name, info.Error)
		}
		d.mu.Lock()
		docs[i] = e.doc
		d.mu.Unlock()
	}
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != "user" || strings.TrimSpace(req.Messages[n-1].Content) == "" {
		return req, nil, errors.New("a question about documents needs a message: type one")
	}
	question := req.Messages[n-1].Content
	count, ctx, err := d.tokenCounter()
	if err != nil {
		return req, nil, err
	}
	// The conversation so far takes room besides the documents.
	overhead := 64
	var turns []Message
	for _, m := range req.Messages[:n-1] {
		if m.Role == "system" {
			continue
		}
		turns = append(turns, m)
		overhead += count(m.Content) + 8
	}
	plan, err := retrieve.PlanContext(retrieve.PlanRequest{Documents: docs, Question: question, Count: count,
		ContextTokens: ctx, ReserveTokens: answerReserve(ctx, req.MaxTokens), OverheadTokens: overhead})
	if err != nil {
		return req, nil, errors.New(documentError(err))
	}
	system := plan.Messages.System
	if sp := d.store.Get().SystemPrompt; sp != "" {
		system = sp + "\n\n" + system
	}
	out := req
	out.Messages = append([]Message{{Role: "system", Content: system}}, turns...)
	out.Messages = append(out.Messages, Message{Role: "user", Content: plan.Messages.User})
	dp := &docPlan{}
	for _, c := range plan.Citations {
		dp.sources = append(dp.sources, Source{Number: c.Number, DocumentID: req.Documents[c.Document],
			Document: c.Name, Whole: c.Whole, Label: c.Label, FirstPage: c.FirstPage, LastPage: c.LastPage,
			FirstLine: c.FirstLine, LastLine: c.LastLine})
	}
	for i, pd := range plan.Documents {
		status := pd.Status
		if pd.Whole {
			status = d.wholeStatus(ctx)
		}
		dp.uses = append(dp.uses, DocumentUse{DocumentID: req.Documents[i], Name: pd.Name, Whole: pd.Whole,
			Sections: pd.Sections, Used: pd.Used, Status: status})
	}
	return out, dp, nil
}
