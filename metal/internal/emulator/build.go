//go:build linux

package emulator

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed rt
var rtFS embed.FS

// ErrNoCompiler means clang (>= 17; Debian 12's clang-19) is not installed.
var ErrNoCompiler = errors.New("the MSL emulator needs clang-19 (make deps installs it; NIBBLE_CLANG names another clang >= 17)")

// cacheVersion changes when the way a library is built changes in a way the
// hashed inputs do not show.
const cacheVersion = "nibble-msl-emulator-1"

// cflags compile the runtime and the kernels into one shared library. No
// fast-math: the poison NaNs in threadgroup memory must stay visible.
var cflags = []string{
	"-std=c++17", "-fms-extensions", "-O2", "-fPIC", "-shared", "-pthread",
	"-fno-exceptions", "-fno-rtti", "-fvisibility=hidden", "-w",
}

type compiler struct {
	path    string
	version string
}

var (
	clangMu    sync.Mutex
	clangFound = map[string]*compiler{}
)

var clangVersion = regexp.MustCompile(`clang version (\d+)`)

// findCompiler returns clang: name if given, else $NIBBLE_CLANG, else
// clang-19 on the PATH. Its version must be 17 or newer.
func findCompiler(name string) (*compiler, error) {
	if name == "" {
		name = os.Getenv("NIBBLE_CLANG")
	}
	if name == "" {
		name = "clang-19"
	}
	clangMu.Lock()
	defer clangMu.Unlock()
	if c, ok := clangFound[name]; ok {
		return c, nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCompiler, err)
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s --version: %v", ErrNoCompiler, path, err)
	}
	m := clangVersion.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("%w: %s is not clang", ErrNoCompiler, path)
	}
	if v, _ := strconv.Atoi(string(m[1])); v < 17 {
		return nil, fmt.Errorf("%w: %s is clang %d", ErrNoCompiler, path, v)
	}
	c := &compiler{path: path, version: string(bytes.TrimSpace(out))}
	clangFound[name] = c
	return c, nil
}

// Available reports whether the emulator can build kernels here: nil, or
// an error wrapping ErrNoCompiler that says what is missing.
func Available() error {
	_, err := findCompiler("")
	return err
}

// runtimeFiles are the runtime sources and the shim, with the generated
// swizzle headers, by file name.
func runtimeFiles() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(rtFS, "rt", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := rtFS.ReadFile(p)
		files[filepath.Base(p)] = b
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("runtime sources: %w", err)
	}
	for n := 2; n <= 4; n++ {
		files[fmt.Sprintf("msl_swizzle%d.inc", n)] = []byte(swizzleInc(n))
	}
	return files, nil
}

// buildKey hashes everything that goes into the library.
func buildKey(c *compiler, files map[string][]byte, code string, extra []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%q\n%q\n", cacheVersion, c.version, cflags, extra)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s %d\n", n, len(files[n]))
		h.Write(files[n])
	}
	fmt.Fprintf(h, "kernels %d\n", len(code))
	h.Write([]byte(code))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// maxCacheAge is how long an unused library stays in the cache.
const maxCacheAge = 30 * 24 * time.Hour

// build returns the path of the shared library for the translated kernels
// in code, compiling it into cacheDir unless it is there already.
func build(c *compiler, cacheDir, code string, extra []string) (path string, cached bool, err error) {
	files, err := runtimeFiles()
	if err != nil {
		return "", false, err
	}
	key := buildKey(c, files, code, extra)
	path = filepath.Join(cacheDir, key+".so")
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		_ = os.Chtimes(path, now, now) // keeps it from being pruned
		return path, true, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", false, fmt.Errorf("emulator cache: %w", err)
	}
	dir, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return "", false, fmt.Errorf("emulator cache: %w", err)
	}
	defer os.RemoveAll(dir)
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return "", false, fmt.Errorf("emulator build: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels.cpp"), []byte(code), 0o644); err != nil {
		return "", false, fmt.Errorf("emulator build: %w", err)
	}
	args := append([]string{}, cflags...)
	args = append(args, extra...)
	args = append(args, "-I", dir, "-o", filepath.Join(dir, "lib.so"),
		filepath.Join(dir, "runtime.cpp"), filepath.Join(dir, "kernels.cpp"), "-lm")
	cmd := exec.Command(c.path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", false, fmt.Errorf("compile kernels: %w\n%s", err, clangErrors(stderr.String(), dir))
	}
	// The translated source stays next to the library, for reading.
	_ = os.Rename(filepath.Join(dir, "kernels.cpp"), filepath.Join(cacheDir, key+".cpp"))
	if err := os.Rename(filepath.Join(dir, "lib.so"), path); err != nil {
		return "", false, fmt.Errorf("emulator cache: %w", err)
	}
	prune(cacheDir)
	return path, false, nil
}

// clangErrors keeps the first errors of clang's output, with the build
// directory taken out of paths (the .metal names are already right).
func clangErrors(out, dir string) string {
	out = strings.ReplaceAll(out, dir+string(filepath.Separator), "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("... (%d more lines)", len(lines)-40))
	}
	return strings.Join(lines, "\n")
}

// prune removes libraries nobody loaded for maxCacheAge, and build
// directories a killed build left behind.
func prune(cacheDir string) {
	ents, err := os.ReadDir(cacheDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < maxCacheAge && !(e.IsDir() && time.Since(info.ModTime()) > time.Hour) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(cacheDir, e.Name()))
	}
}

// defaultCacheDir is the user's cache directory, nibble/msl-emulator, or
// one in the temporary directory where there is none (no $HOME).
func defaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "nibble-msl-emulator")
	}
	return filepath.Join(d, "nibble", "msl-emulator")
}
