package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"nibble/internal/atomicfile"
)

// maxFileSize bounds what Load reads: settings take a few KiB, so a larger
// file is not ours, and reading it whole would only waste memory.
const maxFileSize = 4 << 20

// staleTemp is how old a leftover temporary file must be before Load
// deletes it; a younger one may belong to a save in progress.
const staleTemp = time.Minute

// migrations[v] turns a version-v document into a version-v+1 one. It works
// on the top-level JSON object rather than on Settings so that a step can
// rename or convert fields the struct no longer has.
var migrations = []func(doc map[string]json.RawMessage) error{
	// 0 (no "version" field): dev builds from before the schema had a
	// version. They used the same names; fields they lack take defaults.
	0: func(map[string]json.RawMessage) error { return nil },
	// 1: the keys were snake_case ("context_tokens"); from version 2 they
	// are camelCase ("contextTokens"), as in the rest of the JSON the
	// frontend reads.
	1: camelKeys,
}

// camelKeys renames the snake_case keys of a JSON object, and of the objects
// inside it, to camelCase. Keys are taken in sorted order, so that when a
// file has both "top_p" and "topP" the snake_case one, which the version-1
// schema read, wins.
func camelKeys(doc map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		v, err := camelValue(doc[k])
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		delete(doc, k)
		doc[snakeToCamel(k)] = v
	}
	return nil
}

// camelValue is raw with the keys of the objects in it renamed by
// camelKeys; anything else (a number, a string, malformed JSON) is left for
// the decoding into Settings to accept or report.
func camelValue(raw json.RawMessage) (json.RawMessage, error) {
	switch t := bytes.TrimLeft(raw, " \t\r\n"); {
	case len(t) > 0 && t[0] == '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return raw, nil
		}
		if err := camelKeys(obj); err != nil {
			return nil, err
		}
		return json.Marshal(obj)
	case len(t) > 0 && t[0] == '[':
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return raw, nil
		}
		for i, v := range list {
			var err error
			if list[i], err = camelValue(v); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return json.Marshal(list)
	}
	return raw, nil
}

// snakeToCamel turns "when_context_does_not_fit" into
// "whenContextDoesNotFit"; a key without "_" is returned as it is.
func snakeToCamel(k string) string {
	parts := strings.Split(k, "_")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		r, n := utf8.DecodeRuneInString(p)
		b.WriteRune(unicode.ToUpper(r))
		b.WriteString(p[n:])
	}
	return b.String()
}

// Warning is an error from Load that lost nothing: the file's content was
// kept at Aside, the returned settings are usable, and saving over the
// settings file is safe. The UI shows it once.
type Warning struct {
	Path  string // the settings file
	Aside string // where its content is kept
	Err   error  // what was wrong with it
	// Newer is set when the file came from a newer Nibble: it was loaded as
	// far as this build understands it and copied (not moved) to Aside,
	// since the next save drops what this build does not know.
	Newer bool
}

func (w *Warning) Error() string {
	what := "a problem"
	if w.Err != nil {
		what = strings.ReplaceAll(w.Err.Error(), "\n", "; ")
	}
	if w.Newer {
		return fmt.Sprintf("settings: %s %s; a copy is kept at %s, since saving drops the settings this version does not know", w.Path, what, w.Aside)
	}
	return fmt.Sprintf("settings: %s could not be used (%s); it was moved to %s and the default settings are in use", w.Path, what, w.Aside)
}

func (w *Warning) Unwrap() error { return w.Err }

// IsWarning tells a *Warning (show it, carry on) from the errors after
// which the settings file must not be written over.
func IsWarning(err error) bool {
	var w *Warning
	return errors.As(err, &w)
}

// Load reads the settings at path.
//
//   - No file: Defaults(), nil.
//   - A file that is not valid JSON, not an object, or fails Validate:
//     it is renamed to settings.json.corrupt-<UTC time>, and Load returns
//     Defaults() and a *Warning.
//   - A file from a newer schema: it is copied to settings.json.v<N>, and
//     Load returns what this build understands of it and a *Warning.
//   - Any other error (the file cannot be read or moved aside): Load
//     returns Defaults() and the error; the file is left as it was and the
//     caller must not save over it (Store refuses to).
//
// Fields Load does not know are ignored; fields the file lacks take their
// defaults. Temporary files more than a minute old that a crashed Save
// left next to path are deleted.
func Load(path string) (Settings, error) {
	target := resolve(path)
	removeStaleTemps(target)
	data, err := readFile(target)
	if errors.Is(err, fs.ErrNotExist) {
		return Defaults(), nil
	}
	if err != nil {
		return Defaults(), fmt.Errorf("settings: reading %s: %w", path, err)
	}
	s, newer, perr := parse(data)
	if perr != nil {
		aside, err := moveAside(target, "corrupt-"+time.Now().UTC().Format("20060102T150405Z"))
		if err != nil {
			return Defaults(), fmt.Errorf("settings: %s could not be used (%v), nor moved aside: %w", path, perr, err)
		}
		return Defaults(), &Warning{Path: path, Aside: aside, Err: perr}
	}
	if newer > 0 {
		aside := target + ".v" + strconv.Itoa(newer)
		if err := writeAtomic(aside, data); err != nil {
			return Defaults(), fmt.Errorf("settings: %s is from a newer Nibble (version %d) and could not be copied aside: %w", path, newer, err)
		}
		return s, &Warning{Path: path, Aside: aside, Newer: true,
			Err: fmt.Errorf("is from a newer Nibble (settings version %d; this one reads up to %d)", newer, SchemaVersion)}
	}
	return s, nil
}

// readFile reads a regular file of at most maxFileSize+1 bytes (enough for
// parse to see that it is too large).
func readFile(path string) ([]byte, error) {
	// Stat first: opening a FIFO would block, a folder cannot be parsed.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileSize+1))
}

// parse decodes and migrates a settings file. newer is the file's version
// when it is above SchemaVersion, else 0.
func parse(data []byte) (s Settings, newer int, err error) {
	if len(data) > maxFileSize {
		return Settings{}, 0, fmt.Errorf("larger than %d MiB", maxFileSize>>20)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // some editors add a BOM
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return Settings{}, 0, describe(data, err)
	}
	if doc == nil {
		return Settings{}, 0, errors.New("not a JSON object (null)")
	}
	// Decoded as a struct field, so that it matches keys the way the
	// decoding into Settings below does (case-insensitively, last one wins).
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Settings{}, 0, describe(data, err)
	}
	v := 0
	if head.Version != nil {
		v = *head.Version
	}
	switch {
	case v < 0:
		return Settings{}, 0, &FieldError{"version", fmt.Sprintf("%d is negative", v)}
	case v > SchemaVersion:
		newer = v
	}
	for ; v < SchemaVersion; v++ {
		if v >= len(migrations) || migrations[v] == nil {
			return Settings{}, 0, fmt.Errorf("no migration from settings version %d", v)
		}
		if err := migrations[v](doc); err != nil {
			return Settings{}, 0, fmt.Errorf("migrating from settings version %d: %w", v, err)
		}
	}
	for k := range doc {
		if strings.EqualFold(k, "version") {
			delete(doc, k)
		}
	}
	migrated, err := json.Marshal(doc)
	if err != nil {
		return Settings{}, 0, fmt.Errorf("migrating: %w", err)
	}
	s = Defaults()
	if err := json.Unmarshal(migrated, &s); err != nil {
		return Settings{}, 0, describe(migrated, err)
	}
	s.Version = SchemaVersion
	if err := s.Validate(); err != nil {
		return Settings{}, 0, err
	}
	return s, newer, nil
}

// describe rewords encoding/json's errors for a person editing the file.
func describe(data []byte, err error) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty file")
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := 1, 1
		for _, c := range data[:min(int(se.Offset), len(data))] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Errorf("not a JSON object (found %s)", te.Value)
		}
		return &FieldError{te.Field, fmt.Sprintf("want %s, found %s", kindName(te.Type), te.Value)}
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "an object"
}

// Save validates s and writes it to path atomically: a reader (or the
// next launch after a crash or power loss) sees the old file or the new
// one, never a mix. The file is readable by the user only.
func Save(path string, s Settings) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("settings: not saved: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "&" and "<" in prompts readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("settings: encoding: %w", err)
	}
	if err := writeAtomic(resolve(path), buf.Bytes()); err != nil {
		return fmt.Errorf("settings: saving %s: %w", path, err)
	}
	return nil
}

// writeAtomic replaces path with data (atomicfile: flushed, then renamed,
// then the folder flushed), creating its folder.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// removeStaleTemps deletes the temporary files a crashed Save left
// (atomicfile.TempPrefix). Best
// effort: they are harmless, Load never reads them.
func removeStaleTemps(path string) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	prefix := atomicfile.TempPrefix(path)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			os.Remove(filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
}

// moveAside renames path to path.<suffix>, or path.<suffix>-2 and so on if
// that exists: an earlier file kept aside must not be replaced.
func moveAside(path, suffix string) (string, error) {
	for i := 1; i <= 100; i++ {
		aside := path + "." + suffix
		if i > 1 {
			aside += "-" + strconv.Itoa(i)
		}
		if _, err := os.Lstat(aside); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Rename(path, aside); err != nil {
			return "", err
		}
		atomicfile.SyncDir(filepath.Dir(path))
		return aside, nil
	}
	return "", fmt.Errorf("%s.%s and 99 more names are taken", path, suffix)
}

// resolve follows symbolic links, so that a settings.json linked into a
// dotfiles repository is updated there instead of being replaced by a
// plain file. Unlike filepath.EvalSymlinks it also follows a link whose
// target does not exist yet.
func resolve(path string) string {
	for range 40 { // the kernel's own limit on chained links
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return path
		}
		t, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(path), t)
		}
		path = t
	}
	return path
}

// Store holds the settings of a running app: Get for readers on any
// goroutine, Update to change and save them.
type Store struct {
	path   string
	saveMu sync.Mutex // serializes Update and Reload, so read-modify-write is atomic
	mu     sync.RWMutex
	cur    Settings
	loaded bool // cur came from a Load
	// blocked is the error that keeps Update from writing over a file Load
	// could neither read nor move aside.
	blocked error
}

// Open loads the settings at path into a Store. The Store is never nil and
// always usable; err is Load's: nil, a *Warning to show, or an error after
// which the Store holds the defaults and Update refuses to save until a
// successful Reload.
func Open(path string) (*Store, error) {
	st := &Store{path: path}
	return st, st.Reload()
}

// Path is the settings file.
func (st *Store) Path() string { return st.path }

// Get returns a copy of the current settings.
func (st *Store) Get() Settings {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.cur.Clone()
}

// Update applies fn to a copy of the settings, validates the result and
// saves it; only then do Get's callers see it. If fn, Validate or the save
// fails, nothing changes, in memory or on disk. fn must not call the
// Store's methods.
func (st *Store) Update(fn func(*Settings) error) error {
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	if st.blocked != nil {
		return fmt.Errorf("settings: not saved, so as not to write over %s, which could not be loaded: %w", st.path, st.blocked)
	}
	next := st.Get()
	if err := fn(&next); err != nil {
		return err
	}
	if err := Save(st.path, next); err != nil {
		return err
	}
	st.mu.Lock()
	st.cur = next
	st.mu.Unlock()
	return nil
}

// Reload reads the file again (after the user edited it, or fixed what kept
// it from loading) and returns Load's error. After an error other than a
// *Warning it keeps the settings it had, but Update refuses to save.
func (st *Store) Reload() error {
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	s, err := Load(st.path)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.blocked = nil
	if err != nil && !IsWarning(err) {
		st.blocked = err
		if st.loaded {
			return err // what Get returns was saved; better than the defaults
		}
	}
	st.cur, st.loaded = s, true
	return err
}
