package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultTags are the build tags of `wails build` for a production app
// (its output type, then "production").
const DefaultTags = "desktop,production"

// Options say what to check.
type Options struct {
	Tags     string   // comma-separated build tags
	Patterns []string // package patterns, as for go list
	Dir      string   // where go list runs ("" for the current directory)
	// Overlay is a go list -overlay file: its replacements are read in
	// place of the files they name (the tests plant files this way).
	Overlay string
}

// Result is what a check found.
type Result struct {
	Packages int      // packages type-checked
	Full     []string // the module's packages, checked with function bodies
	Files    []string // the files of those packages that were checked
	Errors   []string // "file:line:col: message", sorted
}

// listed is the part of `go list -json` a check needs.
type listed struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Module     *struct {
		Main      bool
		GoVersion string
	}
	Error *struct {
		Pos string
		Err string
	}
}

// Check type-checks the darwin/arm64 build of opt.Patterns and everything
// they import, cgo on.
func Check(opt Options) (*Result, error) {
	replace, err := readOverlay(opt.Overlay, opt.Dir)
	if err != nil {
		return nil, err
	}
	pkgs, err := list(opt)
	if err != nil {
		return nil, err
	}
	c := &checker{
		fset:    token.NewFileSet(),
		done:    map[string]*types.Package{"unsafe": types.Unsafe},
		replace: replace,
		sizes:   types.SizesFor("gc", "arm64"),
	}
	c.cwd, _ = os.Getwd() // only for shorter positions
	res := &Result{}
	var listErrs []string
	for _, p := range pkgs {
		if p.Error != nil {
			listErrs = append(listErrs, fmt.Sprintf("%s: %s", p.ImportPath, strings.TrimSpace(p.Error.Err)))
			continue
		}
		if p.ImportPath == "unsafe" {
			continue
		}
		full := p.Module != nil && p.Module.Main
		errs, err := c.check(p, full)
		if err != nil {
			return nil, err
		}
		res.Packages++
		if full {
			res.Full = append(res.Full, p.ImportPath)
			for _, f := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
				res.Files = append(res.Files, filepath.Join(p.Dir, f))
			}
		}
		res.Errors = append(res.Errors, errs...)
	}
	if len(listErrs) > 0 {
		return nil, fmt.Errorf("go list (GOOS=darwin GOARCH=arm64 CGO_ENABLED=1): %s", strings.Join(listErrs, "; "))
	}
	sort.Strings(res.Errors)
	return res, nil
}

// list runs go list for darwin/arm64 with cgo: dependencies come before
// the packages that import them.
func list(opt Options) ([]*listed, error) {
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Dir,Standard,GoFiles,CgoFiles,ImportMap,Module,Error"}
	if opt.Tags != "" {
		args = append(args, "-tags", opt.Tags)
	}
	if opt.Overlay != "" {
		args = append(args, "-overlay", opt.Overlay)
	}
	args = append(args, "--")
	args = append(args, opt.Patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = opt.Dir
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list for darwin/arm64: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []*listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("read go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("go list for darwin/arm64: no packages match %s", strings.Join(opt.Patterns, " "))
	}
	return pkgs, nil
}

// readOverlay reads a go list overlay file; its relative paths are
// relative to dir, where go list runs.
func readOverlay(path, dir string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read overlay: %w", err)
	}
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("read overlay %s: %w", path, err)
	}
	base, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	replace := make(map[string]string, len(o.Replace))
	for from, to := range o.Replace {
		if !filepath.IsAbs(from) {
			from = filepath.Join(base, from)
		}
		replace[filepath.Clean(from)] = to
	}
	return replace, nil
}

type checker struct {
	fset    *token.FileSet
	done    map[string]*types.Package // by import path, as go list names them
	replace map[string]string         // overlay: file → the file read instead
	sizes   types.Sizes
	cwd     string
}

// check type-checks p, whose imports are already done, and returns its
// errors: all of them when full, else those of its declarations (a
// dependency's unused imports and the like are its maintainers' business),
// summed up in one line.
func (c *checker) check(p *listed, full bool) ([]string, error) {
	var files []*ast.File
	var errs []string
	const mode = parser.SkipObjectResolution
	for _, name := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
		path := filepath.Join(p.Dir, name)
		var src any
		if r, ok := c.replace[path]; ok {
			b, err := os.ReadFile(r)
			if err != nil {
				return nil, fmt.Errorf("read overlay file for %s: %w", path, err)
			}
			src = b
		}
		f, err := parser.ParseFile(c.fset, path, src, mode)
		if err != nil {
			var list scanner.ErrorList
			if !errors.As(err, &list) {
				return nil, fmt.Errorf("parse %s: %w", path, err)
			}
			for _, e := range list {
				errs = append(errs, fmt.Sprintf("%s: %s", c.position(e.Pos), e.Msg))
			}
		}
		if f != nil {
			// What parsed is still checked, so that the packages that
			// import this one find it.
			files = append(files, f)
		}
	}
	typeErrs := errs
	conf := types.Config{
		Importer: importer(func(path string) (*types.Package, error) {
			if mapped, ok := p.ImportMap[path]; ok {
				path = mapped
			}
			if pkg, ok := c.done[path]; ok {
				return pkg, nil
			}
			return nil, fmt.Errorf("%s imports %s, which go list did not list before it", p.ImportPath, path)
		}),
		FakeImportC:      true,
		IgnoreFuncBodies: !full,
		Sizes:            c.sizes,
		Error: func(err error) {
			te, ok := err.(types.Error)
			if !ok {
				typeErrs = append(typeErrs, err.Error())
				return
			}
			if te.Soft && !full {
				return // unused imports and the like, in someone else's code
			}
			typeErrs = append(typeErrs, fmt.Sprintf("%s: %s", c.position(te.Fset.Position(te.Pos)), te.Msg))
		},
	}
	if p.Module != nil && p.Module.GoVersion != "" {
		conf.GoVersion = "go" + p.Module.GoVersion
	}
	pkg, _ := conf.Check(p.ImportPath, c.fset, files, nil)
	c.done[p.ImportPath] = pkg
	if full {
		return typeErrs, nil
	}
	if len(typeErrs) > 0 {
		return []string{fmt.Sprintf("%s (a dependency, declarations only): %s", p.ImportPath, strings.Join(typeErrs, "; "))}, nil
	}
	return nil, nil
}

// position is pos with its file relative to the working directory when
// it is under it, as go vet prints them.
func (c *checker) position(pos token.Position) string {
	if c.cwd != "" {
		if rel, err := filepath.Rel(c.cwd, pos.Filename); err == nil && !strings.HasPrefix(rel, "..") {
			pos.Filename = rel
		}
	}
	return pos.String()
}

type importer func(path string) (*types.Package, error)

func (f importer) Import(path string) (*types.Package, error) { return f(path) }
