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

// picker is the model picker: the local GGUF files, the headers read so
// far, and the watcher of the models folder.
type picker struct {
	env
	engine localEngine // which model is loaded
	// machine gives each model's expected speed (nil: none shown).
	machine *machine

	mu    sync.Mutex           // guards cache and sig
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
func (p *picker) inspect(path string) (LocalModel, *estimate.Desc) {
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
	p.mu.Lock()
	if f, ok := p.cache[path]; ok && f.size == st.Size() && f.mod.Equal(st.ModTime()) {
		p.mu.Unlock()
		return f.lm, f.desc
	}
	p.mu.Unlock()
	lm, desc := readFacts(path, lm)
	p.mu.Lock()
	if p.cache == nil {
		p.cache = map[string]fileFacts{}
	}
	p.cache[path] = fileFacts{size: st.Size(), mod: st.ModTime(), lm: lm, desc: desc}
	p.mu.Unlock()
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

// models lists the local GGUF files: the models folder (by name; partial
// downloads are not .gguf files and do not show), the files added from
// elsewhere (in the order added), and the demo model once it exists.
// Files that cannot be loaded are listed with their Problem.
func (p *picker) models() ([]LocalModel, error) {
	list, err := p.list()
	p.noteSignature()
	return list, err
}

func (p *picker) list() ([]LocalModel, error) {
	loaded := ""
	if info, ok := p.engine.engine().Info(); ok {
		loaded = filepath.Clean(info.Path)
	}
	out := []LocalModel{}
	seen := map[string]bool{}
	add := func(path, source string) {
		if seen[path] {
			return
		}
		seen[path] = true
		lm, d := p.inspect(path)
		lm.Source, lm.Loaded = source, path == loaded
		if d != nil && p.machine != nil {
			lm.TokPerSec, lm.SpeedNote = p.machine.expectDecode(*d)
		}
		if source == SourceDemo {
			lm.Name, lm.Demo = DemoName, true
		}
		out = append(out, lm)
	}
	paths, err := folderModels(p.dirs.Models)
	for _, f := range paths {
		add(f, SourceFolder)
	}
	for _, f := range p.store.Get().ModelFiles {
		add(filepath.Clean(f), SourceAdded)
	}
	if f := demo.Path(p.dirs.Cache); fileExists(f) {
		add(f, SourceDemo)
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
func (p *picker) inFolder(path string) bool {
	return filepath.Dir(path) == filepath.Clean(p.dirs.Models)
}

// add adds the GGUF at path to the picker after reading its header: a
// file that is not a GGUF, is cut short or has an architecture Nibble
// cannot run is refused with the reason, and nothing is added. Files in
// the models folder and the demo model are listed anyway and are not
// remembered again.
func (p *picker) add(path string) (LocalModel, error) {
	path, err := cleanPath(path)
	if err != nil {
		return LocalModel{}, fmt.Errorf("add model: %w", err)
	}
	lm, _ := p.inspect(path)
	if lm.Problem != "" {
		return LocalModel{}, fmt.Errorf("cannot add %s: %s", filepath.Base(path), lm.Problem)
	}
	switch {
	case demo.Is(p.dirs.Cache, path):
		lm.Source, lm.Name, lm.Demo = SourceDemo, DemoName, true
	case p.inFolder(path):
		lm.Source = SourceFolder
	default:
		lm.Source = SourceAdded
		err := p.store.Update(func(c *settings.Settings) error {
			if !slices.Contains(c.ModelFiles, path) {
				c.ModelFiles = append(c.ModelFiles, path)
			}
			return nil
		})
		if err != nil {
			return LocalModel{}, fmt.Errorf("add %s: %w", filepath.Base(path), err)
		}
	}
	if info, ok := p.engine.engine().Info(); ok {
		lm.Loaded = filepath.Clean(info.Path) == path
	}
	p.changed()
	return lm, nil
}

// forget removes an added file from the picker; the file itself stays
// where it is.
func (p *picker) forget(path string) error {
	path, err := cleanPath(path)
	if err != nil {
		return fmt.Errorf("forget model: %w", err)
	}
	found := false
	err = p.store.Update(func(c *settings.Settings) error {
		n := len(c.ModelFiles)
		c.ModelFiles = slices.DeleteFunc(c.ModelFiles, func(f string) bool { return filepath.Clean(f) == path })
		found = len(c.ModelFiles) < n
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget %s: %w", filepath.Base(path), err)
	}
	if !found {
		if p.inFolder(path) {
			return fmt.Errorf("%s is in the models folder (%s): move the file out of it to remove it from the list", filepath.Base(path), p.dirs.Models)
		}
		return fmt.Errorf("%s is not one of the added models", path)
	}
	p.changed()
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

// changed sends the list of local models to the windop.
func (p *picker) changed() {
	list, _ := p.list()
	p.noteSignature()
	p.emit(EventModels, list)
}

// signature is what the list of models depends on apart from the files'
// contents: the names, sizes and times of the candidate files and which
// one is loaded.
func (p *picker) signature() string {
	var b strings.Builder
	note := func(path string) {
		if st, err := os.Stat(path); err == nil {
			fmt.Fprintf(&b, "%s|%d|%d\n", path, st.Size(), st.ModTime().UnixNano())
		} else {
			fmt.Fprintf(&b, "%s|-\n", path)
		}
	}
	paths, _ := folderModels(p.dirs.Models)
	for _, f := range paths {
		note(f)
	}
	for _, f := range p.store.Get().ModelFiles {
		note(f)
	}
	note(demo.Path(p.dirs.Cache))
	if info, ok := p.engine.engine().Info(); ok {
		b.WriteString("loaded " + info.Path)
	}
	return b.String()
}

func (p *picker) noteSignature() {
	sig := p.signature()
	p.mu.Lock()
	p.sig = sig
	p.mu.Unlock()
}

// startWatch looks at the models folder every watchInterval and sends the
// list when it changed (a file copied in, downloaded or deleted).
func (p *picker) startWatch() {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	p.noteSignature()
	go func() {
		defer close(p.done)
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			sig := p.signature()
			p.mu.Lock()
			changed := sig != p.sig
			p.mu.Unlock()
			if changed {
				p.changed()
			}
		}
	}()
}

func (p *picker) stopWatch() {
	close(p.stop)
	<-p.done
}

// describe is what the picker shows of the file at path (its name, header
// facts and Problem), whether or not it is listed.
func (p *picker) describe(path string) LocalModel {
	path, err := cleanPath(path)
	if err != nil {
		return LocalModel{Path: path, Name: path, Problem: err.Error()}
	}
	lm, _ := p.inspect(path)
	if demo.Is(p.dirs.Cache, path) {
		lm.Source, lm.Name, lm.Demo = SourceDemo, DemoName, true
	}
	return lm
}
