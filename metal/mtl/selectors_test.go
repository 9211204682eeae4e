package mtl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// declarations are the Objective-C declarations of every message in the
// selector table, as Apple's headers write them (receiver first). Checked
// against public copies of the headers: Apple's Metal headers as shipped in
// the iOS 18 / macOS 15 SDKs (MTLResidencySet.h, MTLLibrary.h with
// mathMode, MTLDevice.h with newResidencySetWithDescriptor:error:), Apple's
// metal-cpp (MTLHeaderBridge.hpp spells every Metal selector, e.g.
// "newBufferWithBytesNoCopy:length:options:deallocator:";
// NSPrivate.hpp the Foundation ones) and Apple's developer documentation
// pages of MTLCommandQueue addResidencySet: and MTLDevice
// newResidencySetWithDescriptor:error:. Properties are given as declared;
// a setter entry (setX:) needs a property X that is not readonly.
var declarations = map[string][]string{
	"objc/NSObject.h": {
		"NSObject + (instancetype)alloc;",
		"NSObject - (instancetype)init;",
		"NSObject - (instancetype)retain;",
		"NSObject - (oneway void)release;",
		"NSObject - (BOOL)respondsToSelector:(SEL)aSelector;",
	},
	"Foundation/NSString.h": {
		"NSString + (nullable instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;",
		"NSString @property (nullable, readonly) const char *UTF8String;",
	},
	"Foundation/NSError.h": {
		"NSError @property (readonly, copy) NSString *localizedDescription;",
		"NSError @property (readonly) NSInteger code;",
	},
	"Metal/MTLDevice.h": {
		"MTLDevice @property (nonnull, readonly) NSString *name;",
		"MTLDevice - (nullable id <MTLCommandQueue>)newCommandQueue;",
		"MTLDevice - (nullable id <MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;",
		"MTLDevice - (nullable id <MTLBuffer>)newBufferWithBytesNoCopy:(void *)pointer length:(NSUInteger)length options:(MTLResourceOptions)options deallocator:(void (^ __nullable)(void *pointer, NSUInteger length))deallocator;",
		"MTLDevice - (nullable id <MTLLibrary>)newLibraryWithSource:(NSString *)source options:(nullable MTLCompileOptions *)options error:(__autoreleasing NSError **)error;",
		"MTLDevice - (nullable id <MTLComputePipelineState>)newComputePipelineStateWithFunction:(id <MTLFunction>)computeFunction error:(__autoreleasing NSError **)error;",
		"MTLDevice @property (readonly) NSUInteger maxBufferLength;",
		"MTLDevice @property (readonly) uint64_t recommendedMaxWorkingSetSize;",
		"MTLDevice @property (readonly) NSUInteger currentAllocatedSize;",
		"MTLDevice @property (readonly) BOOL hasUnifiedMemory;",
		"MTLDevice - (nullable id<MTLResidencySet>) newResidencySetWithDescriptor:(MTLResidencySetDescriptor *)desc error:(NSError *__nullable*)error;",
	},
	"Metal/MTLLibrary.h": {
		"MTLCompileOptions @property (readwrite, nonatomic) BOOL fastMathEnabled;",
		"MTLCompileOptions @property (readwrite, nonatomic) MTLMathMode mathMode;",
		"MTLCompileOptions @property (readwrite, nonatomic) MTLLanguageVersion languageVersion;",
		"MTLLibrary - (nullable id <MTLFunction>)newFunctionWithName:(NSString *)name constantValues:(MTLFunctionConstantValues *)constantValues error:(__autoreleasing NSError **)error;",
	},
	"Metal/MTLFunctionConstantValues.h": {
		"MTLFunctionConstantValues - (void)setConstantValue:(const void *)value type:(MTLDataType)type atIndex:(NSUInteger)index;",
	},
	"Metal/MTLComputePipeline.h": {
		"MTLComputePipelineState @property (readonly) NSUInteger maxTotalThreadsPerThreadgroup;",
	},
	"Metal/MTLCommandQueue.h": {
		"MTLCommandQueue - (nullable id <MTLCommandBuffer>)commandBuffer;",
		"MTLCommandQueue - (void)addResidencySet:(id<MTLResidencySet>)residencySet;",
	},
	"Metal/MTLCommandBuffer.h": {
		"MTLCommandBuffer - (nullable id <MTLComputeCommandEncoder>)computeCommandEncoder;",
		"MTLCommandBuffer - (void)commit;",
		"MTLCommandBuffer - (void)waitUntilCompleted;",
		"MTLCommandBuffer @property (readonly) MTLCommandBufferStatus status;",
		"MTLCommandBuffer @property (nullable, readonly) NSError *error;",
		"MTLCommandBuffer @property (readonly) CFTimeInterval GPUStartTime;",
		"MTLCommandBuffer @property (readonly) CFTimeInterval GPUEndTime;",
	},
	"Metal/MTLComputeCommandEncoder.h": {
		"MTLComputeCommandEncoder - (void)setComputePipelineState:(id <MTLComputePipelineState>)state;",
		"MTLComputeCommandEncoder - (void)setBuffer:(nullable id <MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;",
		"MTLComputeCommandEncoder - (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;",
		"MTLComputeCommandEncoder - (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;",
		"MTLComputeCommandEncoder - (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;",
	},
	"Metal/MTLCommandEncoder.h": {
		"MTLCommandEncoder - (void)endEncoding;",
	},
	"Metal/MTLBuffer.h": {
		"MTLBuffer - (void*)contents;",
	},
	"Metal/MTLResidencySet.h": {
		"MTLResidencySetDescriptor @property (nullable, copy, nonatomic) NSString *label;",
		"MTLResidencySetDescriptor @property (nonatomic) NSUInteger initialCapacity;",
		"MTLResidencySet - (void)addAllocation:(id<MTLAllocation>)allocation;",
		"MTLResidencySet - (void)removeAllocation:(id<MTLAllocation>)allocation;",
		"MTLResidencySet - (void)commit;",
		"MTLResidencySet - (void)requestResidency;",
		"MTLResidencySet - (void)endResidency;",
		"MTLResidencySet @property (readonly) uint64_t allocatedSize;",
	},
}

// enums are the header values of the constants the darwin code passes.
var enums = map[string]int{
	"MTLResourceStorageModeShared = 0":        resourceStorageModeShared,
	"MTLLanguageVersion3_0 = (3 << 16) + 0":   languageVersion3_0,
	"MTLMathModeFast = 2":                     mathModeFast,
	"NSUTF8StringEncoding = 4":                utf8,
	"MTLDataTypeFloat = 3":                    dataTypeFloat,
	"MTLDataTypeHalf = 16":                    dataTypeHalf,
	"MTLDataTypeInt = 29":                     dataTypeInt,
	"MTLDataTypeUInt = 33":                    dataTypeUInt,
	"MTLDataTypeShort = 37":                   dataTypeShort,
	"MTLDataTypeUShort = 41":                  dataTypeUShort,
	"MTLDataTypeChar = 45":                    dataTypeChar,
	"MTLDataTypeUChar = 49":                   dataTypeUChar,
	"MTLDataTypeBool = 53":                    dataTypeBool,
	"MTLCommandBufferStatusCompleted = 4":     statusCompleted,
	"MTLCommandBufferStatusError = 5":         statusError,
	"MTLCommandBufferErrorTimeout = 2":        cbErrorTimeout,
	"MTLCommandBufferErrorPageFault = 3":      cbErrorPageFault,
	"MTLCommandBufferErrorAccessRevoked = 4":  cbErrorAccessRevoked,
	"MTLCommandBufferErrorNotPermitted = 7":   cbErrorNotPermitted,
	"MTLCommandBufferErrorOutOfMemory = 8":    cbErrorOutOfMemory,
	"MTLCommandBufferErrorDeviceRemoved = 11": cbErrorDeviceRemoved,
}

// decl is a parsed declaration: the selector(s) it declares, with types.
type decl struct {
	recv, name string
	args       []string
	ret        string
	setter     bool // a settable property also declares setX:
	setName    string
}

var qualifiers = regexp.MustCompile(`\b(nullable|nonnull|_Nullable|_Nonnull|__nullable|__nonnull|__autoreleasing|_Nullable_result|NS_SWIFT_SENDABLE)\b`)

// normType drops nullability qualifiers and spaces next to punctuation.
func normType(t string) string {
	t = qualifiers.ReplaceAllString(t, " ")
	t = strings.Join(strings.Fields(t), " ")
	for _, p := range []string{"*", "^", "(", ")", "<", ">", ",", "[", "]"} {
		t = strings.ReplaceAll(t, " "+p, p)
		t = strings.ReplaceAll(t, p+" ", p)
	}
	return t
}

// paren reads a balanced (...) at s[i] and returns its inside and the index after it.
func paren(t *testing.T, s string, i int) (string, int) {
	if i >= len(s) || s[i] != '(' {
		t.Fatalf("expected ( at %d of %q", i, s)
	}
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[i+1 : j], j + 1
			}
		}
	}
	t.Fatalf("unbalanced parentheses in %q", s)
	return "", 0
}

var ident = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)`)

func parseDecl(t *testing.T, line string) decl {
	recv, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSuffix(strings.TrimSpace(rest), ";")
	d := decl{recv: recv}
	if strings.HasPrefix(rest, "@property") {
		rest = strings.TrimSpace(strings.TrimPrefix(rest, "@property"))
		attrs := ""
		if strings.HasPrefix(rest, "(") {
			var i int
			attrs, i = paren(t, rest, 0)
			rest = rest[i:]
		}
		// The name is the last word; the type is everything before it.
		m := regexp.MustCompile(`^(.*?)\s*\b([A-Za-z_][A-Za-z0-9_]*)$`).FindStringSubmatch(strings.TrimSpace(rest))
		if m == nil {
			t.Fatalf("cannot parse property %q", line)
		}
		d.ret, d.name = normType(m[1]), m[2]
		if !strings.Contains(attrs, "readonly") {
			d.setter = true
			d.setName = "set" + strings.ToUpper(d.name[:1]) + d.name[1:] + ":"
		}
		return d
	}
	if rest == "" || (rest[0] != '-' && rest[0] != '+') {
		t.Fatalf("cannot parse %q", line)
	}
	i := 1
	for i < len(rest) && rest[i] == ' ' {
		i++
	}
	var ret string
	ret, i = paren(t, rest, i)
	d.ret = normType(ret)
	for {
		m := ident.FindStringSubmatchIndex(rest[i:])
		if m == nil {
			break
		}
		part := rest[i+m[2] : i+m[3]]
		i += m[1]
		if i >= len(rest) || rest[i] != ':' {
			if d.name == "" {
				d.name = part // no arguments
			}
			break
		}
		d.name += part + ":"
		i++
		var typ string
		typ, i = paren(t, rest, i)
		d.args = append(d.args, normType(typ))
		if m := ident.FindStringIndex(rest[i:]); m != nil {
			i += m[1] // the parameter's name
		}
	}
	return d
}

func TestSelectorsMatchHeaders(t *testing.T) {
	byKey := map[string]decl{}
	setters := map[string]decl{}
	receivers := map[string]bool{}
	for header, lines := range declarations {
		for _, l := range lines {
			d := parseDecl(t, l)
			receivers[d.recv] = true
			byKey[header+" "+d.recv+" "+d.name] = d
			if d.setter {
				setters[header+" "+d.recv+" "+d.setName] = d
			}
		}
	}
	used := map[string]bool{}
	for i, s := range selectors {
		if s.Name == "" {
			t.Errorf("selector %d has no table entry", i)
			continue
		}
		if n := strings.Count(s.Name, ":"); n != len(s.Args) {
			t.Errorf("%s: %d colons, %d argument types", s.Name, n, len(s.Args))
		}
		key := s.Header + " " + s.Recv + " " + s.Name
		if d, ok := byKey[key]; ok {
			used[key] = true
			if d.ret != s.Ret {
				t.Errorf("%s: returns %q in the header, %q in the table", s.Name, d.ret, s.Ret)
			}
			if strings.Join(d.args, ", ") != strings.Join(s.Args, ", ") {
				t.Errorf("%s: arguments %q in the header, %q in the table", s.Name, d.args, s.Args)
			}
			continue
		}
		if d, ok := setters[key]; ok {
			used[key] = true
			if len(s.Args) != 1 || s.Args[0] != d.ret || s.Ret != "void" {
				t.Errorf("%s: setter of a %q property, table says (%q) -> %q", s.Name, d.ret, s.Args, s.Ret)
			}
			continue
		}
		t.Errorf("%s (%s, %s) is not among the verified header declarations", s.Name, s.Recv, s.Header)
	}
	for _, c := range classes {
		if !receivers[c] {
			t.Errorf("class %s is looked up but declares none of the verified messages", c)
		}
	}
	for k, d := range byKey {
		setKey := strings.TrimSuffix(k, d.name) + d.setName
		if !used[k] && !(d.setter && used[setKey]) {
			t.Errorf("declaration %q is verified but not in the table", k)
		}
	}
}

func TestEnumValues(t *testing.T) {
	re := regexp.MustCompile(`^(\w+) = (.*)$`)
	for text, v := range enums {
		m := re.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("cannot parse %q", text)
		}
		want := 0
		switch expr := strings.ReplaceAll(m[2], " ", ""); {
		case strings.HasPrefix(expr, "("):
			var a, b, c int
			if _, err := fmtSscanf(expr, &a, &b, &c); err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			want = a<<b + c
		default:
			n, err := strconv.Atoi(expr)
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			want = n
		}
		if v != want {
			t.Errorf("%s: the code uses %d", text, v)
		}
	}
}

func fmtSscanf(expr string, a, b, c *int) (int, error) {
	m := regexp.MustCompile(`^\((\d+)<<(\d+)\)\+(\d+)$`).FindStringSubmatch(expr)
	if m == nil {
		return 0, strconv.ErrSyntax
	}
	*a, _ = strconv.Atoi(m[1])
	*b, _ = strconv.Atoi(m[2])
	*c, _ = strconv.Atoi(m[3])
	return 3, nil
}

// TestDarwinCallsMatchTable reads the darwin files: every message is sent
// as f(recv, sl(selX), args...) with as many args as selX has colons, and
// no selector is registered from a string outside the table.
func TestDarwinCallsMatchTable(t *testing.T) {
	fset := token.NewFileSet()
	// The constants' order, from selectors.go.
	sf, err := parser.ParseFile(fset, "selectors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	for _, d := range sf.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		n := 0
		for _, spec := range g.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				if strings.HasPrefix(name.Name, "sel") && len(g.Specs) > 10 {
					index[name.Name] = n
				}
				n++
			}
		}
	}
	if len(index) != int(numSelectors) {
		t.Fatalf("found %d selector constants, the table has %d", len(index), numSelectors)
	}
	files, _ := filepath.Glob("*_darwin.go")
	if len(files) == 0 {
		t.Fatal("no darwin files")
	}
	calls := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "RegisterName" {
				if _, lit := call.Args[0].(*ast.BasicLit); lit {
					t.Errorf("%s: a selector registered from a literal, outside the table", fset.Position(call.Pos()))
				}
			}
			for i, a := range call.Args {
				inner, ok := a.(*ast.CallExpr)
				if !ok {
					continue
				}
				if fn, ok := inner.Fun.(*ast.Ident); !ok || fn.Name != "sl" {
					continue
				}
				id, ok := inner.Args[0].(*ast.Ident)
				if !ok || !strings.HasPrefix(id.Name, "sel") {
					continue // sl(s) of a parameter (respondsTo)
				}
				k, ok := index[id.Name]
				if !ok {
					t.Errorf("%s: %s is not a table selector", fset.Position(inner.Pos()), id.Name)
					continue
				}
				calls++
				if i != 1 {
					continue // a selector passed as an argument (respondsToSelector:)
				}
				if got, want := len(call.Args)-2, len(selectors[k].Args); got != want {
					t.Errorf("%s: %s sent with %d arguments, the header declares %d", fset.Position(call.Pos()), selectors[k].Name, got, want)
				}
			}
			return true
		})
	}
	if calls < int(numSelectors)/2 {
		t.Errorf("only %d messages found in the darwin files", calls)
	}
}

// goTypes are the Go types that carry each Objective-C type through
// objc_msgSend (purego passes them by the C calling convention).
var goTypes = map[string]string{
	"NSUInteger": "uint64", "MTLResourceOptions": "uint64", "MTLDataType": "uint64", "MTLLanguageVersion": "uint64",
	"uint64_t": "uint64", "MTLCommandBufferStatus": "uint64",
	"NSInteger": "int64", "MTLMathMode": "int64",
	"BOOL":      "bool",
	"SEL":       "objc.SEL",
	"NSError**": "*objc.ID",
	"void*":     "unsafe.Pointer", "const void*": "unsafe.Pointer",
	"MTLSize":        "mtlSize",
	"CFTimeInterval": "float64",
	"void(^)(void*pointer,NSUInteger length)": "uintptr", // a block; nil
}

// goType is the Go type of an Objective-C argument or result.
func goType(objcType string, result bool) string {
	if result && objcType == "const char*" {
		return "string" // UTF8String, copied by purego
	}
	if !result && objcType == "const char*" {
		return "*byte"
	}
	if t, ok := goTypes[objcType]; ok {
		return t
	}
	if strings.HasPrefix(objcType, "id<") || strings.HasSuffix(objcType, "*") || objcType == "instancetype" {
		return "objc.ID"
	}
	return "?" + objcType
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	}
	return "?"
}

// TestMessageSignatures checks that each typed objc_msgSend entry point
// (the rt struct's func fields) is called only for selectors whose
// declared argument and result types it carries.
func TestMessageSignatures(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "objc_darwin.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	type sig struct{ params, results []string }
	sigs := map[string]sig{}
	ast.Inspect(f, func(n ast.Node) bool {
		field, ok := n.(*ast.Field)
		if !ok {
			return true
		}
		ft, ok := field.Type.(*ast.FuncType)
		if !ok || len(field.Names) == 0 || !strings.HasPrefix(field.Names[0].Name, "msg") {
			return true
		}
		var s sig
		for _, p := range ft.Params.List {
			for range max(1, len(p.Names)) {
				s.params = append(s.params, exprString(p.Type))
			}
		}
		if ft.Results != nil {
			for _, r := range ft.Results.List {
				s.results = append(s.results, exprString(r.Type))
			}
		}
		sigs[field.Names[0].Name] = s
		return true
	})
	if len(sigs) < 10 {
		t.Fatalf("found %d msg* entry points", len(sigs))
	}
	sf, err := parser.ParseFile(fset, "selectors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{}
	ast.Inspect(sf, func(n ast.Node) bool {
		if g, ok := n.(*ast.GenDecl); ok && g.Tok == token.CONST && len(g.Specs) > 10 {
			i := 0
			for _, spec := range g.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					index[name.Name] = i
					i++
				}
			}
		}
		return true
	})
	files, _ := filepath.Glob("*_darwin.go")
	checked := 0
	for _, name := range files {
		df, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(df, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || exprString(fn.X) != "rt" || !strings.HasPrefix(fn.Sel.Name, "msg") {
				return true
			}
			inner, ok := call.Args[1].(*ast.CallExpr)
			if !ok {
				return true
			}
			id, ok := inner.Args[0].(*ast.Ident)
			if !ok {
				return true
			}
			k, ok := index[id.Name]
			if !ok {
				return true
			}
			s, sel := sigs[fn.Sel.Name], selectors[k]
			pos := fset.Position(call.Pos())
			if len(s.params) != 2+len(sel.Args) || s.params[0] != "objc.ID" || s.params[1] != "objc.SEL" {
				t.Errorf("%s: %s sent through %s%v", pos, sel.Name, fn.Sel.Name, s.params)
				return true
			}
			for i, a := range sel.Args {
				if want := goType(a, false); s.params[2+i] != want {
					t.Errorf("%s: %s argument %d is %s (Go %s), %s passes %s", pos, sel.Name, i, a, want, fn.Sel.Name, s.params[2+i])
				}
			}
			if sel.Ret != "void" && sel.Ret != "oneway void" {
				if want := goType(sel.Ret, true); len(s.results) != 1 || s.results[0] != want {
					t.Errorf("%s: %s returns %s (Go %s), %s returns %v", pos, sel.Name, sel.Ret, want, fn.Sel.Name, s.results)
				}
			}
			checked++
			return true
		})
	}
	if checked < int(numSelectors)/2 {
		t.Errorf("only %d typed sends checked", checked)
	}
}
