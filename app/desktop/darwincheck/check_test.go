package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, where go list runs.
const root = "../../.."

// The darwin build of the app has no type errors, and it is the darwin
// file set that was checked: the status item and the dialogs in, the
// other systems' platform out.
func TestAppTypeChecksForDarwin(t *testing.T) {
	res, err := Check(Options{Tags: DefaultTags, Patterns: []string{"."}, Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Error(e)
	}
	if !slices.Contains(res.Full, "nibble/app/desktop") {
		t.Fatalf("nibble/app/desktop was not checked in full; checked %v", res.Full)
	}
	has := func(name string) bool {
		return slices.ContainsFunc(res.Files, func(f string) bool {
			return filepath.ToSlash(f) == filepath.ToSlash(filepath.Join(absRoot(t), "app/desktop", name))
		})
	}
	for _, name := range []string{"statusitem_darwin.go", "dialogs_darwin.go", "platform_darwin.go", "run_cgo.go"} {
		if !has(name) {
			t.Errorf("app/desktop/%s was not checked", name)
		}
	}
	for _, name := range []string{"platform_other.go", "run_nocgo.go"} {
		if has(name) {
			t.Errorf("app/desktop/%s is not part of the darwin cgo build, yet was checked", name)
		}
	}
}

// Errors planted in the darwin build are reported with their file and
// line: in plain files and in files that import "C", misusing darwinkit or
// Wails, and syntax errors; an error in a Linux-only file is not the
// darwin build's.
func TestPlantedErrorsAreReported(t *testing.T) {
	dir := t.TempDir()
	planted := map[string]string{
		"zz_planted_darwin.go": `package desktop

import "github.com/progrium/darwinkit/macos/appkit"

func plantedStatusItem() {
	item := appkit.StatusBar_SystemStatusBar().StatusItemWithLength(appkit.VariableStatusItemLength)
	item.Button().SetTooltip("Nibble")
}
`,
		"zz_planted_cgo_darwin.go": `package desktop

// #include <stdlib.h>
import "C"

import "github.com/wailsapp/wails/v2/pkg/runtime"

func plantedWails() {
	runtime.WindowSetPosition(nil, 1.5, 2)
	_ = C.free
}
`,
		"zz_planted_syntax_darwin.go": `package desktop

func plantedSyntax() { _ = }
`,
		"zz_planted_linux.go": `package desktop

func plantedLinux() { var s string = 1; _ = s }
`,
	}
	replace := map[string]string{}
	for name, src := range planted {
		tmp := filepath.Join(dir, name)
		if err := os.WriteFile(tmp, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(absRoot(t), "app/desktop", name)] = tmp
	}
	overlay := filepath.Join(dir, "overlay.json")
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		t.Fatal(err)
	}

	res, err := Check(Options{Tags: DefaultTags, Patterns: []string{"./app/desktop"}, Dir: root, Overlay: overlay})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"zz_planted_cgo_darwin.go:9:33: cannot use 1.5 (untyped float constant) as int value",
		"zz_planted_darwin.go:7:16: item.Button().SetTooltip undefined",
		"zz_planted_syntax_darwin.go:3:28: expected operand",
	}
	if len(res.Errors) != len(want) {
		t.Errorf("got %d errors, want %d:\n%s", len(res.Errors), len(want), strings.Join(res.Errors, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(res.Errors, func(e string) bool { return strings.Contains(e, w) }) {
			t.Errorf("no error %q in:\n%s", w, strings.Join(res.Errors, "\n"))
		}
	}
}

func TestBadPattern(t *testing.T) {
	if _, err := Check(Options{Patterns: []string{"./no/such/package"}, Dir: root}); err == nil {
		t.Fatal("a pattern that matches nothing checked fine")
	}
}

func absRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
