package service

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"nibble/app/desktop/demo"
	"nibble/app/settings"
	"nibble/engine/estimate"
	"nibble/engine/gguf"
	"nibble/engine/model"
)

// Where a LocalModel comes from.
const (
	SourceFolder = "folder" // the models folder (downloads go there)
	SourceAdded  = "added"  // added from elsewhere: settings.modelFiles
	SourceDemo   = "demo"   // the synthesized demo model
)

// DemoName is how the picker names the demo model.
const DemoName = "Demo model"

// watchInterval is how often the models folder is looked at. Polling is
// portable and cheap (one directory listing); a change shows within it.
var watchInterval = 2 * time.Second

// modelWatch is the picker's state: the headers read so far and the
// watcher of the models folder.
type modelWatch struct {
	mu    sync.Mutex
	cache map[string]fileFacts // by path
	sig   string               // what the folder looked like when the list was last sent
	stop  chan struct{}
	done  chan struct{}
}

// fileFacts is what a file's header says, valid while its size and
// modification time stay the same.
type fileFacts struct {
	size int64
	mod  time.Time
	lm   LocalModel     // Source and Loaded unset
	desc *estimate.Desc // nil when the file has a Problem
}

// inspect describes the GGUF at path from its header (never its tensor
// data): the facts the picker shows, and the estimator's description, or a
// Problem in words when it cannot be loaded.
func (s *Service) inspect(path string) (LocalModel, *estimate.Desc) {
	lm := LocalModel{Path: path, Name: filepath.Base(path)}
	st, err := os.Stat(path)
	if err != nil {
		lm.Problem = problemOf(err)
		return lm, nil
	}
	if !st.Mode().IsRegular() {
		lm.Problem = "not a regular file"
		return lm, nil
	}
	lm.Size = st.Size()
	w := &s.models
	w.mu.Lock()
	if f, ok := w.cache[path]; ok && f.size == st.Size() && f.mod.Equal(st.ModTime()) {
		w.mu.Unlock()
		return f.lm, f.desc
	}
	w.mu.Unlock()
	lm, desc := readFacts(path, lm)
	w.mu.Lock()
	if w.cache == nil {
		w.cache = map[string]fileFacts{}
	}
	w.cache[path] = fileFacts{size: st.Size(), mod: st.ModTime(), lm: lm, desc: desc}
	w.mu.Unlock()
	return lm, desc
}

func readFacts(path string, lm LocalModel) (LocalModel, *estimate.Desc) {
	fh, err := os.Open(path)
	if err != nil {
		lm.Problem = problemOf(err)
		return lm, nil
	}
	defer fh.Close()
	// Long arrays (the vocabulary) are passed over: only their lengths
	// matter here, and the loader checks the rest.
	f, err := gguf.ReadHeader(fh, lm.Size, gguf.HeaderOptions{SkipArraysLongerThan: 64})
	if err != nil {
		lm.Problem = problemOf(err)
		return lm, nil
	}
	lm.Arch = f.Arch()
	if ft, ok := f.Uint("general.file_type"); ok {
		lm.FileType = estimate.FileTypeName(ft)
	}
	if n, ok := f.String("general.name"); ok && strings.TrimSpace(n) != "" {
		lm.Name = n // as the engine names it once loaded
	}
	if !model.Supported(lm.Arch) {
		lm.Problem = unsupported(lm.Arch)
		return lm, nil
	}
	d, err := estimate.FromGGUF(f, filepath.Base(path))
	if err != nil {
		lm.Problem = "damaged GGUF header: " + err.Error()
		return lm, nil
	}
	d.Source = path
	lm.Params, lm.CtxTrain = d.Params, d.HParams.CtxTrain
	return lm, &d
}

// problemOf puts a header error in the user's words.
func problemOf(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "the file is missing (moved or deleted?)"
	case errors.Is(err, fs.ErrPermission):
		return "the file cannot be read (permission denied)"
	case strings.Contains(msg, "not a GGUF file"), strings.Contains(msg, "too short for a GGUF file"):
		return "not a GGUF file"
	case errors.Is(err, io.ErrUnexpectedEOF), strings.Contains(msg, "past the end of the file"),
		strings.Contains(msg, "bytes left in the file"): // a length or count that the rest cannot hold
		return "cut short (truncated): the file ends before its data does; copy or download it again"
	}
	return "damaged GGUF header: " + strings.TrimPrefix(msg, "gguf: ")
}

func unsupported(arch string) string {
	if arch == "" {
		return "damaged GGUF header: general.architecture is missing"
	}
	return fmt.Sprintf("unsupported architecture %q: Nibble runs Llama, Mistral and Qwen2 models", arch)
}

// Models lists the local GGUF files: the models folder (by name; partial
// downloads are not .gguf files and do not show), the files added from
// elsewhere (in the order added), and the demo model once it exists.
// Files that cannot be loaded are listed with their Problem.
func (s *Service) Models() ([]LocalModel, error) {
	list, err := s.listModels()
	s.noteSignature()
	return list, err
}

func (s *Service) listModels() ([]LocalModel, error) {
	loaded := ""
	if info, ok := s.engine().Info(); ok {
		loaded = filepath.Clean(info.Path)
	}
	out := []LocalModel{}
	seen := map[string]bool{}
	add := func(path, source string) {
		if seen[path] {
			return
		}
		seen[path] = true
		lm, _ := s.inspect(path)
		lm.Source, lm.Loaded = source, path == loaded
		if source == SourceDemo {
			lm.Name, lm.Demo = DemoName, true
		}
		out = append(out, lm)
	}
	paths, err := folderModels(s.dirs.Models)
	for _, p := range paths {
		add(p, SourceFolder)
	}
	for _, p := range s.store.Get().ModelFiles {
		add(filepath.Clean(p), SourceAdded)
	}
	if p := demo.Path(s.dirs.Cache); fileExists(p) {
		add(p, SourceDemo)
	}
	return out, err
}

// folderModels lists the .gguf files of dir, by name. Hidden files and
// folders are left out; links are followed.
func folderModels(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("models folder: %w", err)
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.EqualFold(filepath.Ext(name), ".gguf") {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// inFolder reports whether path is directly in the models folder.
func (s *Service) inFolder(path string) bool {
	return filepath.Dir(path) == filepath.Clean(s.dirs.Models)
}

// AddModel adds the GGUF at path to the picker after reading its header: a
// file that is not a GGUF, is cut short or has an architecture Nibble
// cannot run is refused with the reason, and nothing is added. Files in
// the models folder and the demo model are listed anyway and are not
// remembered again.
func (s *Service) AddModel(path string) (LocalModel, error) {
	path, err := cleanPath(path)
	if err != nil {
		return LocalModel{}, fmt.Errorf("add model: %w", err)
	}
	lm, _ := s.inspect(path)
	if lm.Problem != "" {
		return LocalModel{}, fmt.Errorf("cannot add %s: %s", filepath.Base(path), lm.Problem)
	}
	switch {
	case demo.Is(s.dirs.Cache, path):
		lm.Source, lm.Name, lm.Demo = SourceDemo, DemoName, true
	case s.inFolder(path):
		lm.Source = SourceFolder
	default:
		lm.Source = SourceAdded
		err := s.store.Update(func(c *settings.Settings) error {
			if !slices.Contains(c.ModelFiles, path) {
				c.ModelFiles = append(c.ModelFiles, path)
			}
			return nil
		})
		if err != nil {
			return LocalModel{}, fmt.Errorf("add %s: %w", filepath.Base(path), err)
		}
	}
	if info, ok := s.engine().Info(); ok {
		lm.Loaded = filepath.Clean(info.Path) == path
	}
	s.modelsChanged()
	return lm, nil
}

// ForgetModel removes an added file from the picker; the file itself stays
// where it is.
func (s *Service) ForgetModel(path string) error {
	path, err := cleanPath(path)
	if err != nil {
		return fmt.Errorf("forget model: %w", err)
	}
	found := false
	err = s.store.Update(func(c *settings.Settings) error {
		n := len(c.ModelFiles)
		c.ModelFiles = slices.DeleteFunc(c.ModelFiles, func(p string) bool { return filepath.Clean(p) == path })
		found = len(c.ModelFiles) < n
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget %s: %w", filepath.Base(path), err)
	}
	if !found {
		if s.inFolder(path) {
			return fmt.Errorf("%s is in the models folder (%s): move the file out of it to remove it from the list", filepath.Base(path), s.dirs.Models)
		}
		return fmt.Errorf("%s is not one of the added models", path)
	}
	s.modelsChanged()
	return nil
}

// cleanPath checks a path given by the window and makes it absolute.
func cleanPath(path string) (string, error) {
	switch {
	case strings.TrimSpace(path) == "":
		return "", errors.New("no file given")
	case strings.ContainsRune(path, 0):
		return "", errors.New("the file name contains a NUL byte")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return abs, nil
}

// modelsChanged sends the list of local models to the window.
func (s *Service) modelsChanged() {
	list, _ := s.listModels()
	s.noteSignature()
	s.emit(EventModels, list)
}

// signature is what the list of models depends on apart from the files'
// contents: the names, sizes and times of the candidate files and which
// one is loaded.
func (s *Service) signature() string {
	var b strings.Builder
	note := func(p string) {
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s|%d|%d\n", p, st.Size(), st.ModTime().UnixNano())
		} else {
			fmt.Fprintf(&b, "%s|-\n", p)
		}
	}
	paths, _ := folderModels(s.dirs.Models)
	for _, p := range paths {
		note(p)
	}
	for _, p := range s.store.Get().ModelFiles {
		note(p)
	}
	note(demo.Path(s.dirs.Cache))
	if info, ok := s.engine().Info(); ok {
		b.WriteString("loaded " + info.Path)
	}
	return b.String()
}

func (s *Service) noteSignature() {
	sig := s.signature()
	s.models.mu.Lock()
	s.models.sig = sig
	s.models.mu.Unlock()
}

// startWatch looks at the models folder every watchInterval and sends the
// list when it changed (a file copied in, downloaded or deleted).
func (s *Service) startWatch() {
	w := &s.models
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	s.noteSignature()
	go func() {
		defer close(w.done)
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			sig := s.signature()
			w.mu.Lock()
			changed := sig != w.sig
			w.mu.Unlock()
			if changed {
				s.modelsChanged()
			}
		}
	}()
}

func (s *Service) stopWatch() {
	close(s.models.stop)
	<-s.models.done
}

// Describe is what the picker shows of the file at path (its name, header
// facts and Problem), whether or not it is listed.
func (s *Service) Describe(path string) LocalModel {
	path, err := cleanPath(path)
	if err != nil {
		return LocalModel{Path: path, Name: path, Problem: err.Error()}
	}
	lm, _ := s.inspect(path)
	if demo.Is(s.dirs.Cache, path) {
		lm.Source, lm.Name, lm.Demo = SourceDemo, DemoName, true
	}
	return lm
}
