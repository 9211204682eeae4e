package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new" {
		t.Fatalf("read %q, %v; want \"new\"", got, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	assertOnly(t, dir, "settings.json")
}

// A failed write leaves the file as it was and no temporary file behind.
func TestWriteFailureKeepsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o644, func(w io.Writer) error {
		if _, err := w.Write([]byte("half")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("file holds %q after a failed write, want \"old\"", got)
	}
	assertOnly(t, dir, "model.gguf")
}

func TestWriteFileIntoMissingFolderFails(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "x.json"), nil, 0o644); err == nil {
		t.Fatal("wrote into a folder that does not exist")
	}
}

func TestTempPrefix(t *testing.T) {
	if got := TempPrefix("/a/settings.json"); got != ".settings.json.tmp-" {
		t.Errorf("TempPrefix = %q", got)
	}
	long := strings.Repeat("x", 250)
	if got := TempPrefix("/a/" + long); got != ".tmp-" {
		t.Errorf("TempPrefix of a 250-byte name = %q, want .tmp-", got)
	}
	// A name at the file system's limit still gets a temporary file.
	dir := t.TempDir()
	path := filepath.Join(dir, strings.Repeat("y", 255))
	if err := WriteFile(path, []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertOnly(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("folder holds %v, want %v", names, want)
	}
}
