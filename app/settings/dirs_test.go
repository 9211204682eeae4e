package settings

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakePlatform answers like an OS where the user's home is home.
func fakePlatform(goos, home string, env map[string]string) platform {
	return platform{
		goos:   goos,
		getenv: func(k string) string { return env[k] },
		home:   func() (string, error) { return home, nil },
		config: func() (string, error) { return filepath.Join(home, "Library", "Application Support"), nil },
		cache:  func() (string, error) { return filepath.Join(home, "Library", "Caches"), nil },
	}
}

func TestDefaultDirsNibbleHome(t *testing.T) {
	root := t.TempDir()
	t.Setenv(HomeEnv, root)
	t.Setenv("XDG_DATA_HOME", "/elsewhere") // NIBBLE_HOME wins
	d, err := DefaultDirs()
	if err != nil {
		t.Fatal(err)
	}
	want := Dirs{
		Data:   filepath.Join(root, "data"),
		Config: filepath.Join(root, "config"),
		Cache:  filepath.Join(root, "cache"),
		Models: filepath.Join(root, "models"),
	}
	if d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
	if got := d.SettingsFile(); got != filepath.Join(root, "config", "settings.json") {
		t.Fatalf("SettingsFile = %s", got)
	}

	// On the Mac too, and "~" and relative roots become absolute.
	for root, want := range map[string]string{
		"~/portable":  "/Users/ann/portable",
		"~":           "/Users/ann",
		"/Volumes/NB": "/Volumes/NB",
	} {
		d, err := dirsFor(fakePlatform("darwin", "/Users/ann", map[string]string{HomeEnv: root}))
		if err != nil {
			t.Fatal(err)
		}
		if d.Models != filepath.Join(want, "models") || d.Config != filepath.Join(want, "config") {
			t.Errorf("%s=%s: got %+v", HomeEnv, root, d)
		}
	}
	d, err = dirsFor(fakePlatform("linux", "/home/ann", map[string]string{HomeEnv: "rel"}))
	if err != nil || !filepath.IsAbs(d.Data) {
		t.Errorf("relative %s: got %+v, %v", HomeEnv, d, err)
	}
}

func TestDefaultDirsMac(t *testing.T) {
	d, err := dirsFor(fakePlatform("darwin", "/Users/ann", nil))
	if err != nil {
		t.Fatal(err)
	}
	support := "/Users/ann/Library/Application Support/Nibble"
	want := Dirs{Data: support, Config: support, Cache: "/Users/ann/Library/Caches/Nibble", Models: support + "/Models"}
	if d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
}

func TestDefaultDirsXDG(t *testing.T) {
	home := "/home/ann"
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Dirs
	}{
		{"unset", nil, Dirs{
			Data: home + "/.local/share/nibble", Config: home + "/.config/nibble",
			Cache: home + "/.cache/nibble", Models: home + "/.local/share/nibble/models"}},
		{"set", map[string]string{"XDG_DATA_HOME": "/d", "XDG_CONFIG_HOME": "/c", "XDG_CACHE_HOME": "/k"}, Dirs{
			Data: "/d/nibble", Config: "/c/nibble", Cache: "/k/nibble", Models: "/d/nibble/models"}},
		// The XDG spec: relative paths are invalid and to be ignored.
		{"relative", map[string]string{"XDG_DATA_HOME": "d", "XDG_CONFIG_HOME": "./c", "XDG_CACHE_HOME": "/k"}, Dirs{
			Data: home + "/.local/share/nibble", Config: home + "/.config/nibble",
			Cache: "/k/nibble", Models: home + "/.local/share/nibble/models"}},
	} {
		d, err := dirsFor(fakePlatform("linux", home, tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if d != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, d, tc.want)
		}
	}

	// And through the real environment.
	if runtime.GOOS != "linux" {
		return
	}
	t.Setenv(HomeEnv, "")
	t.Setenv("HOME", "/home/bob")
	t.Setenv("XDG_DATA_HOME", "/xd")
	t.Setenv("XDG_CONFIG_HOME", "/xc")
	t.Setenv("XDG_CACHE_HOME", "")
	d, err := DefaultDirs()
	if err != nil {
		t.Fatal(err)
	}
	want := Dirs{Data: "/xd/nibble", Config: "/xc/nibble", Cache: "/home/bob/.cache/nibble", Models: "/xd/nibble/models"}
	if d != want {
		t.Fatalf("got %+v, want %+v", d, want)
	}
}

func TestDefaultDirsNoHome(t *testing.T) {
	p := fakePlatform("linux", "", nil)
	p.home = func() (string, error) { return "", errors.New("$HOME is not defined") }
	if _, err := dirsFor(p); err == nil || !strings.Contains(err.Error(), HomeEnv) {
		t.Fatalf("want an error that suggests %s, got %v", HomeEnv, err)
	}
	p.goos = "darwin"
	p.config = p.home
	if _, err := dirsFor(p); err == nil || !strings.Contains(err.Error(), HomeEnv) {
		t.Fatalf("want an error that suggests %s, got %v", HomeEnv, err)
	}
}

func TestEnsure(t *testing.T) {
	root := t.TempDir()
	t.Setenv(HomeEnv, filepath.Join(root, "nb"))
	d, err := DefaultDirs()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Data, d.Config, d.Cache, d.Models} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", p, fi.Mode().Perm())
		}
	}
	if err := d.Ensure(); err != nil { // again: nothing to do
		t.Fatal(err)
	}

	// A file where a folder should be: a clear error naming the folder.
	blocked := Dirs{Data: d.Data, Config: d.Config, Cache: filepath.Join(d.Cache, "x"), Models: d.Models}
	if err := os.WriteFile(filepath.Join(d.Cache, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := blocked.Ensure(); err == nil || !strings.Contains(err.Error(), "cache folder") {
		t.Fatalf("got %v", err)
	}
	if err := (Dirs{}).Ensure(); err == nil {
		t.Fatal("the zero Dirs: want an error")
	}
}
