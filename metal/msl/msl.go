// Package msl reads Metal Shading Language sources as one Metal library:
// the kernels it defines (names, parameters and their bindings, the
// function constants each reads), its function constants, and the structs
// the kernels take as arguments. The Metal device (metal/mtl) checks
// pipelines and dispatches against this; the emulator's C++ and the NVIDIA
// harness's CUDA are written from the same parse by metal/internal/msltoc,
// which the app does not link. The package is plain Go and builds
// everywhere.
//
// What Parse reads:
//
//   - `constant T x [[function_constant(i)]];` declares a function
//     constant, and a program-scope `constant T y = e;` whose e names one is
//     computed from it (a kernel that reads y reads x);
//   - a kernel (`kernel`, or a [[kernel]] attribute) takes only parameters
//     with an attribute: [[buffer(i)]], [[threadgroup(i)]] or a built-in
//     position; [[max_total_threads_per_threadgroup(n)]] bounds it;
//   - a `template [[host_name("…")]]` instantiation of a kernel template is
//     a kernel by that name;
//   - a kernel-local `threadgroup T buf[N];` is storage shared by the
//     threadgroup (see File.ThreadgroupLocals).
//
// Errors name the .metal file and line.
package msl

import (
	"fmt"
	"strconv"
	"strings"
)

// Source is one .metal file: a name for #line and error messages, and its text.
type Source struct {
	Name string
	Text string
}

// Unit is what a set of sources defines, read as one Metal library.
type Unit struct {
	Kernels   []Kernel   // in registration order
	Constants []Constant // in declaration order
}

// Kernel is an entry point the runtime can dispatch by name.
type Kernel struct {
	Name       string // the host name (the function's name unless host_name gives one)
	Function   string // the C++ function or function template
	Args       string // template arguments of a host_name instantiation
	File       string
	Line       int
	MaxThreads int // [[max_total_threads_per_threadgroup(n)]], or 0
	Params     []Param
	// Constants are the function constants the kernel's body names,
	// directly or through a constant computed from them (not through the
	// functions it calls).
	Constants []string
}

// Param is one kernel parameter and its attribute.
type Param struct {
	Name  string
	Type  string
	Attr  string // "buffer", "threadgroup", or a built-in such as "thread_position_in_grid"
	Index int    // of buffer(i) and threadgroup(i)
}

// Constant is a function constant.
type Constant struct {
	Name     string
	Type     string
	Index    int
	File     string
	Line     int
	Optional bool // the sources ask is_function_constant_defined(name)
}

// Error is a translation error at a .metal line.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// builtins maps the thread-position attributes to the shims' names.
var builtins = map[string]string{
	"thread_position_in_grid":             "thread_position_in_grid",
	"thread_position_in_threadgroup":      "thread_position_in_threadgroup",
	"threadgroup_position_in_grid":        "threadgroup_position_in_grid",
	"threads_per_threadgroup":             "threads_per_threadgroup",
	"dispatch_threads_per_threadgroup":    "threads_per_threadgroup",
	"threadgroups_per_grid":               "threadgroups_per_grid",
	"threads_per_grid":                    "threads_per_grid",
	"grid_size":                           "threads_per_grid",
	"thread_index_in_threadgroup":         "thread_index_in_threadgroup",
	"thread_index_in_simdgroup":           "thread_index_in_simdgroup",
	"simdgroup_index_in_threadgroup":      "simdgroup_index_in_threadgroup",
	"simdgroups_per_threadgroup":          "simdgroups_per_threadgroup",
	"dispatch_simdgroups_per_threadgroup": "simdgroups_per_threadgroup",
	"threads_per_simdgroup":               "threads_per_simdgroup",
	"thread_execution_width":              "threads_per_simdgroup",
}

// Builtin is the name the emulator's and the CUDA shim give a built-in
// position attribute (thread_position_in_grid, grid_size...).
func Builtin(attr string) (string, bool) {
	name, ok := builtins[attr]
	return name, ok
}

// Concat joins sources into one MSL text with a #line directive before each,
// for a Metal compiler (newLibraryWithSource) that should report the same
// file names and lines as the emulator.
func Concat(srcs []Source) string {
	var b strings.Builder
	for _, s := range srcs {
		fmt.Fprintf(&b, "#line 1 %s\n", strconv.Quote(s.Name))
		b.WriteString(s.Text)
		if !strings.HasSuffix(s.Text, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
