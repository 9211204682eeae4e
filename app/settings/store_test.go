package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func settingsPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "settings.json")
}

// custom differs from Defaults in every field.
func custom() Settings {
	s := Defaults()
	s.LastModel = "/Users/ann/Models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
	s.ContextTokens = 32768
	s.KVType = "q8"
	s.Sampling = Sampling{Temperature: 0.3, TopP: 0.9, TopK: 20, MinP: 0.1, RepeatPenalty: 1.1}
	s.SystemPrompt = "Answer briefly. Q&A <b>\"quoted\"</b> ünïcödé\n"
	s.Theme = "dark"
	s.StartAtLogin = true
	s.Hotkey = "cmd+shift+space"
	s.Server = Server{Enabled: true, Address: "[::1]:8080"}
	s.Slots = 4
	s.Threads = 6
	s.QuickActions = []QuickAction{{"Haiku", "Write a haiku about:\n{{text}}"}}
	return s
}

func TestRoundTrip(t *testing.T) {
	path := settingsPath(t)
	want := custom()
	if reflect.DeepEqual(want, Defaults()) {
		t.Fatal("custom() is the defaults")
	}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// Readable by a person: indented, and prompts are not \u-escaped.
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte("\n  \"systemPrompt\": \"Answer briefly. Q&A <b>")) {
		t.Errorf("file is not written for people:\n%s", data)
	}
	assertOnly(t, filepath.Dir(path), "settings.json")
}

// assertOnly fails unless dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

func TestLoadMissing(t *testing.T) {
	path := settingsPath(t)
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, Defaults()) {
		t.Fatalf("got %+v", s)
	}
	assertOnly(t, filepath.Dir(path)) // Load writes nothing
	// Nor does a missing folder bother it.
	if _, err := Load(filepath.Join(path, "no", "settings.json")); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCorruptPreservedAside(t *testing.T) {
	for _, tc := range []struct{ name, data, reason string }{
		{"truncated", `{"version": 1, "theme": "da`, "line 1, column 28"},
		{"garbage", "\x00\x01binary", "invalid JSON"},
		{"empty", "", "empty file"},
		{"null", "null", "not a JSON object"},
		{"array", `[{"version": 1}]`, "not a JSON object"},
		{"trailing", `{"version": 1} {"version": 1}`, "invalid JSON"},
		{"wrong type", `{"version": 1, "slots": "two"}`, "slots: want a whole number"},
		{"nested wrong type", `{"sampling": {"temperature": "hot"}}`, "sampling.temperature: want a number"},
		{"out of range", `{"version": 1, "sampling": {"temperature": -1}}`, "sampling.temperature: -1 is out of range"},
		{"public server", "{\n\"server\": {\"enabled\": true, \"address\": \"0.0.0.0:11435\"}}", "server.address"},
		{"negative version", `{"version": -1}`, "version: -1 is negative"},
		{"huge", `{"system_prompt": "` + strings.Repeat("x", maxFileSize) + `"}`, "larger than 4 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := settingsPath(t)
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Load(path)
			var w *Warning
			if !errors.As(err, &w) || w.Newer || !IsWarning(err) {
				t.Fatalf("want a *Warning, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), w.Aside) {
				t.Errorf("message %q lacks %q or where the file went", err, tc.reason)
			}
			if !reflect.DeepEqual(s, Defaults()) {
				t.Errorf("want the defaults, got %+v", s)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the corrupt file is still at %s", path)
			}
			if !strings.HasPrefix(filepath.Base(w.Aside), "settings.json.corrupt-") || filepath.Dir(w.Aside) != filepath.Dir(path) {
				t.Errorf("moved to %s", w.Aside)
			}
			if got, err := os.ReadFile(w.Aside); err != nil || string(got) != tc.data {
				t.Errorf("the content kept aside differs (%v)", err)
			}
			// Saving now is safe and the next load is clean.
			if err := Save(path, s); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(path); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadCorruptTwiceKeepsBoth(t *testing.T) {
	path := settingsPath(t)
	var asides []string
	for i := range 3 { // within one second: the names must not collide
		data := fmt.Sprintf("{broken %d", i)
		os.WriteFile(path, []byte(data), 0o600)
		_, err := Load(path)
		var w *Warning
		if !errors.As(err, &w) {
			t.Fatal(err)
		}
		asides = append(asides, w.Aside)
	}
	for i, a := range asides {
		if got, _ := os.ReadFile(a); string(got) != fmt.Sprintf("{broken %d", i) {
			t.Errorf("%s holds %q", a, got)
		}
	}
}

func TestLoadTolerant(t *testing.T) {
	path := settingsPath(t)
	// Unknown fields (top level and nested) are ignored, missing ones take
	// the defaults, a BOM is skipped, keys match case-insensitively.
	data := "\xef\xbb\xbf" + `{
	  "version": 1,
	  "theme": "light",
	  "future_field": {"x": [1, 2]},
	  "sampling": {"Temperature": 0.5, "mirostat": 2},
	  "quick_actions": []
	}`
	os.WriteFile(path, []byte(data), 0o600)
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Theme = "light"
	want.Sampling.Temperature = 0.5
	want.QuickActions = []QuickAction{} // the user removed them all: stays so
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if got, _ := os.ReadFile(path); string(got) != data {
		t.Fatal("Load changed a good file")
	}
}

func TestLoadVersion0Migrates(t *testing.T) {
	path := settingsPath(t)
	os.WriteFile(path, []byte(`{"context_tokens": 8192, "kv_type": "q4"}`), 0o600)
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != SchemaVersion || s.ContextTokens != 8192 || s.KVType != "q4" || s.Slots != 2 {
		t.Fatalf("got %+v", s)
	}
	if len(migrations) != SchemaVersion {
		t.Fatalf("%d migrations for schema version %d", len(migrations), SchemaVersion)
	}
}

// TestLoadSnakeCaseFile: a settings file written before the keys were
// camelCase (schema version 1, snake_case) loads with every value kept, and
// the next save writes camelCase keys.
func TestLoadSnakeCaseFile(t *testing.T) {
	path := settingsPath(t)
	legacy := `{
  "version": 1,
  "last_model": "/Users/ann/Models/Qwen2.5-7B-Instruct-Q4_K_M.gguf",
  "context_tokens": 32768,
  "kv_type": "q8",
  "sampling": {
    "temperature": 0.3,
    "top_p": 0.9,
    "top_k": 20,
    "min_p": 0.1,
    "repeat_penalty": 1.1
  },
  "system_prompt": "Answer briefly.",
  "theme": "dark",
  "start_at_login": true,
  "hotkey": "cmd+shift+space",
  "server": {
    "enabled": true,
    "address": "[::1]:8080",
    "token": "s3cret"
  },
  "slots": 4,
  "threads": 6,
  "quick_actions": [
    {
      "name": "Haiku",
      "prompt": "Write a haiku about:\n{{text}}"
    }
  ],
  "memory_limit": 8589934592,
  "model_files": ["/Volumes/Models/phi-3-mini-q4.gguf"],
  "remote_endpoints": [
    {
      "name": "lab",
      "url": "http://10.0.0.5:8000/v1",
      "key": "sk-lab",
      "model": "qwen",
      "context_tokens": 16384
    }
  ],
  "active_remote": "lab",
  "document_max_bytes": 1048576,
  "when_context_does_not_fit": "evict",
  "max_reply_tokens": 512
}
`
	os.WriteFile(path, []byte(legacy), 0o600)
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Version:       SchemaVersion,
		LastModel:     "/Users/ann/Models/Qwen2.5-7B-Instruct-Q4_K_M.gguf",
		ContextTokens: 32768,
		KVType:        "q8",
		Sampling:      Sampling{Temperature: 0.3, TopP: 0.9, TopK: 20, MinP: 0.1, RepeatPenalty: 1.1},
		SystemPrompt:  "Answer briefly.",
		Theme:         "dark",
		StartAtLogin:  true,
		Hotkey:        "cmd+shift+space",
		Server:        Server{Enabled: true, Address: "[::1]:8080", Token: "s3cret"},
		Slots:         4,
		Threads:       6,
		QuickActions:  []QuickAction{{"Haiku", "Write a haiku about:\n{{text}}"}},
		MemoryLimit:   8 << 30,
		ModelFiles:    []string{"/Volumes/Models/phi-3-mini-q4.gguf"},
		RemoteEndpoints: []RemoteEndpoint{{Name: "lab", URL: "http://10.0.0.5:8000/v1", Key: "sk-lab", Model: "qwen",
			ContextTokens: 16384}},
		ActiveRemote:          "lab",
		DocumentMaxBytes:      1 << 20,
		WhenContextDoesNotFit: "evict",
		MaxReplyTokens:        512,
	}
	// Every field differs from its default, so none can pass by being lost;
	// fields added after version 1 cannot be in its files.
	addedLater := map[string]bool{"Version": true, "PromptTemplates": true}
	def, w := reflect.ValueOf(Defaults()), reflect.ValueOf(want)
	for i := range w.NumField() {
		if name := w.Type().Field(i).Name; !addedLater[name] && reflect.DeepEqual(w.Field(i).Interface(), def.Field(i).Interface()) {
			t.Fatalf("the legacy file leaves %s at its default", name)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if data, _ := os.ReadFile(path); string(data) != legacy {
		t.Fatal("Load changed the legacy file")
	}

	if err := Save(path, got); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if snake := regexp.MustCompile(`"[A-Za-z]+_[A-Za-z_]*":`).Find(data); snake != nil {
		t.Errorf("saved a snake_case key %s:\n%s", snake, data)
	}
	for _, key := range []string{`"version": 2,`, `"contextTokens": 32768,`, `"topP": 0.9,`, `"contextTokens": 16384`, `"whenContextDoesNotFit": "evict"`} {
		if !bytes.Contains(data, []byte(key)) {
			t.Errorf("saved file lacks %s:\n%s", key, data)
		}
	}
	if again, err := Load(path); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("reloaded %+v, %v", again, err)
	}
}

func TestSnakeToCamel(t *testing.T) {
	for in, want := range map[string]string{
		"theme": "theme", "top_p": "topP", "when_context_does_not_fit": "whenContextDoesNotFit",
		"Last_Model": "LastModel", "a__b": "aB", "trailing_": "trailing", "ünï_cödé": "ünïCödé",
	} {
		if got := snakeToCamel(in); got != want {
			t.Errorf("snakeToCamel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMigrationHook(t *testing.T) {
	saved := migrations[0]
	t.Cleanup(func() { migrations[0] = saved })
	// A step that renames a field, as a future schema change would.
	migrations[0] = func(doc map[string]json.RawMessage) error {
		if v, ok := doc["ctx"]; ok {
			doc["context_tokens"] = v
			delete(doc, "ctx")
		}
		if _, ok := doc["poison"]; ok {
			return errors.New("cannot convert poison")
		}
		return nil
	}
	path := settingsPath(t)
	os.WriteFile(path, []byte(`{"ctx": 2048}`), 0o600)
	s, err := Load(path)
	if err != nil || s.ContextTokens != 2048 {
		t.Fatalf("got %d, %v", s.ContextTokens, err)
	}
	// A version-1 file skips the step.
	os.WriteFile(path, []byte(`{"version": 1, "ctx": 2048}`), 0o600)
	if s, err := Load(path); err != nil || s.ContextTokens != 4096 {
		t.Fatalf("got %d, %v", s.ContextTokens, err)
	}
	// A failed step is a corrupt file: kept aside.
	os.WriteFile(path, []byte(`{"poison": 1}`), 0o600)
	if _, err := Load(path); !IsWarning(err) || !strings.Contains(err.Error(), "migrating from settings version 0: cannot convert poison") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadNewerVersion(t *testing.T) {
	path := settingsPath(t)
	data := `{"version": 9, "theme": "dark", "new_in_v9": true}`
	os.WriteFile(path, []byte(data), 0o600)
	s, err := Load(path)
	var w *Warning
	if !errors.As(err, &w) || !w.Newer {
		t.Fatalf("want a Newer warning, got %v", err)
	}
	if s.Theme != "dark" || s.Version != SchemaVersion {
		t.Fatalf("got %+v", s)
	}
	if got, _ := os.ReadFile(path); string(got) != data {
		t.Fatal("the newer file was changed")
	}
	if got, _ := os.ReadFile(w.Aside); string(got) != data || w.Aside != path+".v9" {
		t.Fatalf("copy at %s holds %q", w.Aside, got)
	}
}

func TestLoadUnreadableIsNotOverwritten(t *testing.T) {
	path := settingsPath(t)
	// A folder where the file should be: Load cannot read it, cannot call it
	// corrupt, and the Store must not replace it.
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(path, "keep"), []byte("x"), 0o600)
	st, err := Open(path)
	if err == nil || IsWarning(err) {
		t.Fatalf("want a hard error, got %v", err)
	}
	if !reflect.DeepEqual(st.Get(), Defaults()) {
		t.Fatal("want the defaults")
	}
	err = st.Update(func(s *Settings) error { s.Theme = "dark"; return nil })
	if err == nil || !strings.Contains(err.Error(), "not saved") {
		t.Fatalf("Update: got %v", err)
	}
	if st.Get().Theme != "system" {
		t.Fatal("the refused update shows in Get")
	}
	// Once the user moves it away, Reload lets saving resume.
	os.Rename(path, path+".mine")
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(s *Settings) error { s.Theme = "dark"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(path+".mine", "keep")); string(got) != "x" {
		t.Fatal("lost the user's file")
	}
}

func TestStaleTempFilesIgnoredAndCleaned(t *testing.T) {
	path := settingsPath(t)
	dir := filepath.Dir(path)
	if err := Save(path, custom()); err != nil {
		t.Fatal(err)
	}
	// What a crash between CreateTemp and Rename leaves: a partial file.
	stale := filepath.Join(dir, ".settings.json.tmp-123")
	fresh := filepath.Join(dir, ".settings.json.tmp-456") // maybe another save in progress
	other := filepath.Join(dir, ".other.json.tmp-789")    // not ours
	for _, p := range []string{stale, fresh, other} {
		os.WriteFile(p, []byte(`{"theme": "li`), 0o600)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	os.Chtimes(other, old, old)

	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, custom()) {
		t.Fatalf("got %+v", s)
	}
	assertOnly(t, dir, ".other.json.tmp-789", ".settings.json.tmp-456", "settings.json")
}

func TestSaveRejectsInvalid(t *testing.T) {
	path := settingsPath(t)
	Save(path, custom())
	before, _ := os.ReadFile(path)
	bad := custom()
	bad.Sampling.TopP = 2
	if err := Save(path, bad); err == nil || !strings.Contains(err.Error(), "sampling.topP") {
		t.Fatalf("got %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("an invalid save changed the file")
	}
	assertOnly(t, filepath.Dir(path), "settings.json")
}

func TestSaveFollowsSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	dotfiles := t.TempDir()
	real := filepath.Join(dotfiles, "nibble.json")
	path := settingsPath(t)
	// The target need not exist yet.
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, custom()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
	if s, err := Load(path); err != nil || !reflect.DeepEqual(s, custom()) {
		t.Fatalf("got %+v, %v", s, err)
	}
	if _, err := os.Stat(real); err != nil {
		t.Fatal(err)
	}
}

func TestStoreUpdate(t *testing.T) {
	path := settingsPath(t)
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(func(s *Settings) error { s.Theme = "dark"; s.Slots = 3; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := Load(path); got.Theme != "dark" || got.Slots != 3 {
		t.Fatalf("saved %+v", got)
	}

	before, _ := os.ReadFile(path)
	errNo := errors.New("user cancelled")
	if err := st.Update(func(s *Settings) error { s.Theme = "light"; return errNo }); err != errNo {
		t.Fatalf("got %v", err)
	}
	err = st.Update(func(s *Settings) error { s.Theme = "light"; s.ContextTokens = 100; return nil })
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "contextTokens" {
		t.Fatalf("got %v", err)
	}
	if st.Get().Theme != "dark" {
		t.Fatal("a failed update shows in Get")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a failed update changed the file")
	}

	// Get hands out copies.
	g := st.Get()
	g.QuickActions[0].Name = "mutated"
	if st.Get().QuickActions[0].Name != "Summarize" {
		t.Fatal("Get shares the quick actions")
	}
	// So does Update: fn's edits of a slice do not leak when it fails.
	st.Update(func(s *Settings) error { s.QuickActions[0].Name = "leak"; return errNo })
	if st.Get().QuickActions[0].Name != "Summarize" {
		t.Fatal("a failed update leaked")
	}
}

func TestStoreConcurrent(t *testing.T) {
	path := settingsPath(t)
	st, _ := Open(path)
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if err := st.Update(func(s *Settings) error { s.Threads++; return nil }); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			if err := st.Get().Validate(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if got, _ := Load(path); got.Threads != writers*each || st.Get().Threads != writers*each {
		t.Fatalf("threads = %d on disk, %d in memory; want %d", got.Threads, st.Get().Threads, writers*each)
	}
	assertOnly(t, filepath.Dir(path), "settings.json")
}
