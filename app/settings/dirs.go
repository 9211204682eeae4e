package settings

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// HomeEnv names the environment variable that puts everything Nibble keeps
// under one folder (data, config, cache and models subfolders): for tests and
// for a portable install on an external disk.
const HomeEnv = "NIBBLE_HOME"

// FileName is the settings file's name inside Dirs.Config.
const FileName = "settings.json"

// Dirs are the folders Nibble keeps things in.
type Dirs struct {
	Data   string // conversations, documents, anything the user would miss
	Config string // settings.json
	Cache  string // what can be rebuilt; the OS may purge it
	Models string // downloaded GGUF files
}

// SettingsFile is where the settings live.
func (d Dirs) SettingsFile() string { return filepath.Join(d.Config, FileName) }

// DefaultDirs returns the folders a user of the platform expects:
//
//	macOS:  ~/Library/Application Support/Nibble (data and config; models in its Models
//	        subfolder), ~/Library/Caches/Nibble
//	Linux:  $XDG_DATA_HOME/nibble (~/.local/share/nibble; models in its models subfolder),
//	        $XDG_CONFIG_HOME/nibble (~/.config/nibble), $XDG_CACHE_HOME/nibble (~/.cache/nibble)
//	$NIBBLE_HOME set: $NIBBLE_HOME/{data,config,cache,models} on every platform
//
// It creates nothing; see Ensure.
func DefaultDirs() (Dirs, error) {
	return dirsFor(platform{
		goos:   runtime.GOOS,
		getenv: os.Getenv,
		home:   os.UserHomeDir,
		config: os.UserConfigDir,
		cache:  os.UserCacheDir,
	})
}

// platform is what DefaultDirs reads from the OS, apart so that tests can
// check the macOS layout on any machine.
type platform struct {
	goos          string
	getenv        func(string) string
	home          func() (string, error)
	config, cache func() (string, error)
}

func dirsFor(p platform) (Dirs, error) {
	if root := p.getenv(HomeEnv); root != "" {
		return homeDirs(root, p)
	}
	switch p.goos {
	case "darwin", "ios":
		// Application Support, not ~/Library/Preferences: Preferences is for
		// cfprefsd's plists, which it caches and may rewrite behind our back.
		support, err := p.config()
		if err != nil {
			return Dirs{}, noDirs(err)
		}
		caches, err := p.cache()
		if err != nil {
			return Dirs{}, noDirs(err)
		}
		data := filepath.Join(support, "Nibble")
		return Dirs{Data: data, Config: data, Cache: filepath.Join(caches, "Nibble"), Models: filepath.Join(data, "Models")}, nil
	case "windows", "plan9":
		// %AppData% and %LocalAppData% (roaming vs. machine-local), as the
		// os package defines them.
		cfg, err := p.config()
		if err != nil {
			return Dirs{}, noDirs(err)
		}
		cache, err := p.cache()
		if err != nil {
			return Dirs{}, noDirs(err)
		}
		data := filepath.Join(cfg, "Nibble")
		return Dirs{Data: data, Config: data, Cache: filepath.Join(cache, "Nibble"), Models: filepath.Join(data, "Models")}, nil
	}
	// Other Unix: the XDG base directories. Not os.UserConfigDir: it fails on
	// a relative $XDG_CONFIG_HOME, which the spec says to ignore, and there is
	// no os function for $XDG_DATA_HOME.
	home, err := p.home()
	if err != nil {
		return Dirs{}, noDirs(err)
	}
	xdg := func(env, fallback string) string {
		if v := p.getenv(env); filepath.IsAbs(v) {
			return filepath.Join(v, "nibble")
		}
		return filepath.Join(home, fallback, "nibble")
	}
	data := xdg("XDG_DATA_HOME", ".local/share")
	return Dirs{Data: data, Config: xdg("XDG_CONFIG_HOME", ".config"), Cache: xdg("XDG_CACHE_HOME", ".cache"), Models: filepath.Join(data, "models")}, nil
}

func homeDirs(root string, p platform) (Dirs, error) {
	// launchd plists and .desktop files pass "~" through unexpanded.
	if root == "~" || strings.HasPrefix(root, "~/") {
		home, err := p.home()
		if err != nil {
			return Dirs{}, fmt.Errorf("settings: $%s=%s: %w", HomeEnv, root, err)
		}
		root = filepath.Join(home, root[1:])
	}
	// Absolute, so that a later chdir does not move it.
	root, err := filepath.Abs(root)
	if err != nil {
		return Dirs{}, fmt.Errorf("settings: $%s: %w", HomeEnv, err)
	}
	return Dirs{
		Data:   filepath.Join(root, "data"),
		Config: filepath.Join(root, "config"),
		Cache:  filepath.Join(root, "cache"),
		Models: filepath.Join(root, "models"),
	}, nil
}

func noDirs(err error) error {
	return fmt.Errorf("settings: cannot tell where to keep Nibble's files (%w); set $%s to a folder", err, HomeEnv)
}

// Ensure creates the folders that are missing, readable by the user only
// (0700: they hold private conversations). Folders that exist keep their
// permissions: the user may have chosen them.
func (d Dirs) Ensure() error {
	for _, f := range []struct{ name, path string }{
		{"data", d.Data}, {"config", d.Config}, {"cache", d.Cache}, {"models", d.Models},
	} {
		if f.path == "" {
			return fmt.Errorf("settings: the %s folder is not set", f.name)
		}
		if err := os.MkdirAll(f.path, 0o700); err != nil {
			return fmt.Errorf("settings: creating the %s folder: %w", f.name, err)
		}
	}
	return nil
}
