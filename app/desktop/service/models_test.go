package service

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nibble/app/desktop/demo"
)

func findModel(list []LocalModel, path string) (LocalModel, bool) {
	for _, m := range list {
		if m.Path == path {
			return m, true
		}
	}
	return LocalModel{}, false
}

// The picker lists the models folder's GGUF files with their header facts,
// bad files with a one-line reason, never partial downloads, the added
// files and the demo model, and marks the loaded one.
func TestModelsListsFolderAddedAndDemo(t *testing.T) {
	s, _ := newService(t)
	good := filepath.Join(s.dirs.Models, "b-good.gguf")
	data := tinyModel(t, good, 8192)
	notGGUF := filepath.Join(s.dirs.Models, "a-notes.gguf")
	writeFile(t, notGGUF, []byte("these are my notes, not a model\n"))
	cut := filepath.Join(s.dirs.Models, "c-cut.gguf")
	writeFile(t, cut, truncated(data))
	alien := filepath.Join(s.dirs.Models, "d-alien.gguf")
	writeFile(t, alien, bytes.ReplaceAll(data, []byte("llama"), []byte("gpt2x")))
	writeFile(t, filepath.Join(s.dirs.Models, "e-partial.gguf.part"), data[:100])
	writeFile(t, filepath.Join(s.dirs.Models, "readme.txt"), []byte("hi"))
	if err := s.Start(); err != nil { // loads the demo model
		t.Fatal(err)
	}

	list, err := s.Models()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range list {
		paths = append(paths, filepath.Base(m.Path))
	}
	if want := []string{"a-notes.gguf", "b-good.gguf", "c-cut.gguf", "d-alien.gguf", demo.FileName}; !slices.Equal(paths, want) {
		t.Fatalf("listed %v, want %v", paths, want)
	}
	m, _ := findModel(list, good)
	if m.Source != SourceFolder || m.Arch != "llama" || m.FileType != "Q8_0" || m.Size != int64(len(data)) ||
		m.Params <= 0 || m.CtxTrain != 8192 || m.Problem != "" || m.Loaded || m.Demo {
		t.Fatalf("good model %+v", m)
	}
	for path, want := range map[string]string{notGGUF: "not a GGUF file", cut: "cut short (truncated)", alien: `unsupported architecture "gpt2x"`} {
		m, _ := findModel(list, path)
		if !strings.HasPrefix(m.Problem, want) || strings.Contains(m.Problem, "\n") {
			t.Errorf("%s: problem %q, want one line starting %q", filepath.Base(path), m.Problem, want)
		}
	}
	d, _ := findModel(list, demo.Path(s.dirs.Cache))
	if d.Source != SourceDemo || !d.Demo || !d.Loaded || d.Name != DemoName {
		t.Fatalf("demo model %+v", d)
	}
}

func TestAddAndForgetModel(t *testing.T) {
	s, rec := newService(t)
	elsewhere := t.TempDir()
	good := filepath.Join(elsewhere, "mine.gguf")
	data := tinyModel(t, good, 4096)
	notGGUF := filepath.Join(elsewhere, "photo.gguf")
	writeFile(t, notGGUF, []byte("\x89PNG\r\n\x1a\n not a model"))
	cut := filepath.Join(elsewhere, "cut.gguf")
	writeFile(t, cut, truncated(data))
	cutHeader := filepath.Join(elsewhere, "cut-header.gguf") // ends inside the vocabulary
	writeFile(t, cutHeader, data[:len(data)/20])

	for path, want := range map[string]string{
		notGGUF:                                  "cannot add photo.gguf: not a GGUF file",
		cut:                                      "cannot add cut.gguf: cut short (truncated)",
		cutHeader:                                "cannot add cut-header.gguf: cut short (truncated)",
		filepath.Join(elsewhere, "missing.gguf"): "the file is missing",
		"":                                       "no file given",
	} {
		if _, err := s.AddModel(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AddModel(%q) = %v, want an error with %q", path, err, want)
		}
	}
	if got := s.Settings().ModelFiles; len(got) != 0 {
		t.Fatalf("refused files were remembered: %v", got)
	}
	if n := rec.count(EventModels); n != 0 {
		t.Fatalf("%d models:changed events for refused files", n)
	}

	lm, err := s.AddModel(good)
	if err != nil {
		t.Fatal(err)
	}
	if lm.Source != SourceAdded || lm.Path != good || lm.Arch != "llama" || lm.CtxTrain != 4096 {
		t.Fatalf("added %+v", lm)
	}
	if _, err := s.AddModel(good); err != nil { // twice: remembered once
		t.Fatal(err)
	}
	if got := s.Settings().ModelFiles; !slices.Equal(got, []string{good}) {
		t.Fatalf("model_files %v", got)
	}
	ev, ok := rec.last(EventModels)
	if list, _ := ev.([]LocalModel); !ok || !slices.ContainsFunc(list, func(m LocalModel) bool { return m.Path == good }) {
		t.Fatalf("models:changed did not carry the added model: %v", ev)
	}
	list, _ := s.Models()
	if m, ok := findModel(list, good); !ok || m.Source != SourceAdded {
		t.Fatalf("added model not listed: %+v", list)
	}

	// A file of the models folder is listed anyway and not remembered.
	inFolder := filepath.Join(s.dirs.Models, "folder.gguf")
	writeFile(t, inFolder, data)
	if lm, err := s.AddModel(inFolder); err != nil || lm.Source != SourceFolder {
		t.Fatalf("AddModel(in folder) = %+v, %v", lm, err)
	}
	if err := s.ForgetModel(inFolder); err == nil || !strings.Contains(err.Error(), "models folder") {
		t.Fatalf("ForgetModel(in folder) = %v", err)
	}

	if err := s.ForgetModel(good); err != nil {
		t.Fatal(err)
	}
	if got := s.Settings().ModelFiles; len(got) != 0 {
		t.Fatalf("model_files after forgetting: %v", got)
	}
	if _, err := os.Stat(good); err != nil {
		t.Fatalf("forgetting deleted the file: %v", err)
	}
	if err := s.ForgetModel(good); err == nil {
		t.Fatal("forgetting twice succeeded")
	}
	// An added file that went away stays listed with the reason, so it can
	// be forgotten.
	if _, err := s.AddModel(good); err != nil {
		t.Fatal(err)
	}
	os.Remove(good)
	list, _ = s.Models()
	if m, _ := findModel(list, good); !strings.Contains(m.Problem, "missing") {
		t.Fatalf("a vanished added file: %+v", m)
	}
}

// The watcher sends the list when a file appears in or leaves the models
// folder, and stops at Close.
func TestModelsFolderIsWatched(t *testing.T) {
	old := watchInterval
	watchInterval = 20 * time.Millisecond
	defer func() { watchInterval = old }()
	s, rec := newService(t)
	p := filepath.Join(s.dirs.Models, "new.gguf")
	tmp := filepath.Join(t.TempDir(), "new.gguf")
	tinyModel(t, tmp, 2048)
	time.Sleep(5 * watchInterval)
	if n := rec.count(EventModels); n != 0 {
		t.Fatalf("%d models:changed events with nothing changed", n)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "models:changed with the new file", func() bool {
		ev, ok := rec.last(EventModels)
		list, _ := ev.([]LocalModel)
		_, found := findModel(list, p)
		return ok && found
	})
	os.Remove(p)
	waitFor(t, "models:changed without the file", func() bool {
		ev, _ := rec.last(EventModels)
		list, _ := ev.([]LocalModel)
		_, found := findModel(list, p)
		return !found
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n := rec.count(EventModels)
	tinyModel(t, p, 2048)
	time.Sleep(5 * watchInterval)
	if rec.count(EventModels) != n {
		t.Fatal("the watcher still runs after Close")
	}
}
