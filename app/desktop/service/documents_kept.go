package service

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"nibble/app/documents"
	"nibble/app/history"
)

// The documents a conversation keeps. Each question about documents keeps
// them with its conversation in the history, text and all; reopening the
// conversation attaches them again from there, so a follow-up is asked
// about the same text (the same prompt, when they go in whole). A file
// that changed or is gone since is said so on its chip.

// keptDocuments is what the history keeps of the documents ids (ready:
// Send checked them).
func (d *docStore) keptDocuments(ids []string) ([]history.Document, error) {
	entries, err := d.entriesOf(ids)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]history.Document, 0, len(entries))
	for _, e := range entries {
		doc := e.doc
		if doc == nil || e.fileSHA256 == "" {
			return nil, fmt.Errorf("%s is not read yet", e.info.Name)
		}
		k := history.Document{Name: doc.Name, Kind: string(doc.Kind), Language: doc.Language, Title: doc.Title,
			Path: e.path, Size: e.info.Size, SHA256: e.fileSHA256, Text: doc.Text, Warnings: doc.Warnings}
		for _, p := range doc.Pages {
			k.Pages = append(k.Pages, history.DocumentPage{Number: p.Number, Start: p.Start, End: p.End})
		}
		out = append(out, k)
	}
	return out, nil
}

// restore attaches kept documents again, as a conversation reopened from
// the history had them. Each comes back at once in state reading: its file
// is checked and its text counted in the background (EventDocument), and
// it ends ready, with a Note when its file changed or is gone.
func (d *docStore) restore(kept []history.Document) []DocumentInfo {
	out := make([]DocumentInfo, 0, len(kept))
	for _, k := range kept {
		doc := &documents.Document{Name: k.Name, Kind: documents.Kind(k.Kind), Language: k.Language, Title: k.Title,
			Text: k.Text, Warnings: k.Warnings}
		for _, p := range k.Pages {
			doc.Pages = append(doc.Pages, documents.PageSpan{Number: p.Number, Start: p.Start, End: p.End})
		}
		doc.IndexLines()
		e := d.newEntry(k.Name, k.Size)
		d.mu.Lock()
		e.path, e.fileSHA256 = k.Path, k.SHA256
		e.info.Stage = "checking the file"
		d.mu.Unlock()
		d.docWork(func() {
			note := fileNote(k.Path, k.Size, k.SHA256)
			d.setDoc(e, func(i *DocumentInfo) { i.Note = note })
			d.countDocument(e, doc)
		})
		out = append(out, d.docInfo(e))
	}
	return out
}

// keptCopy ends every note: the answers go on from the text kept with the
// conversation.
const keptCopy = "answering from the copy kept with this conversation"

// fileNote says whether the file a kept document was read from is still
// as it was: "" when it is (or when there was no file, only bytes from
// the page), else what happened to it.
func fileNote(path string, size int64, sha string) string {
	if path == "" {
		return ""
	}
	name := filepath.Base(path)
	f, err := os.Open(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("%s is no longer in %s: %s", name, filepath.Dir(path), keptCopy)
	case err != nil:
		return fmt.Sprintf("%s cannot be read now (%v): %s", name, errors.Unwrap(err), keptCopy)
	}
	defer f.Close()
	changed := fmt.Sprintf("%s has changed since it was attached: %s (drop it again to ask about the new version)", name, keptCopy)
	if st, err := f.Stat(); err == nil && st.Size() != size {
		return changed
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Sprintf("%s cannot be read now (%v): %s", name, err, keptCopy)
	}
	if hex.EncodeToString(h.Sum(nil)) != sha {
		return changed
	}
	return ""
}
