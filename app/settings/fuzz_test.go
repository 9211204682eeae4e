package settings

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzLoad feeds arbitrary bytes as settings.json. Load must not panic; it
// either loads the file (which stays as it was) or moves it aside intact,
// and what it returns is always valid and survives a save.
// Seeds: testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "settings.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Load(path)
		if verr := s.Validate(); verr != nil {
			t.Fatalf("Load returned invalid settings: %v", verr)
		}
		var w *Warning
		switch {
		case err == nil:
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Fatal("Load changed a file it loaded")
			}
		case errors.As(err, &w) && w.Newer:
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Fatal("Load changed a newer file")
			}
			if got, _ := os.ReadFile(w.Aside); !bytes.Equal(got, data) {
				t.Fatal("the copy of a newer file differs")
			}
		case errors.As(err, &w):
			if _, serr := os.Lstat(path); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("rejected (%v) but not moved aside", err)
			}
			if got, _ := os.ReadFile(w.Aside); !bytes.Equal(got, data) {
				t.Fatal("the file moved aside differs")
			}
			if !reflect.DeepEqual(s, Defaults()) {
				t.Fatal("rejected, yet not the defaults")
			}
		default:
			t.Fatalf("a regular file in a writable folder: %v", err)
		}
		if err := Save(path, s); err != nil {
			t.Fatal(err)
		}
		again, err := Load(path)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, s)
		}
	})
}
