package tokenizer

import (
	"encoding/json"
	"nibble/internal/testdata"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"nibble/engine/gguf"
)

func testdataDir(t testing.TB) string { return testdata.Dir(t) }

var (
	tokCacheMu sync.Mutex
	tokCache   = map[string]*Tokenizer{}
)

// loadGGUF builds (once per test binary) the tokenizer of a GGUF file.
func loadGGUF(t testing.TB, path string) *Tokenizer {
	t.Helper()
	tokCacheMu.Lock()
	defer tokCacheMu.Unlock()
	if tk, ok := tokCache[path]; ok {
		return tk
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	tk, err := FromGGUF(f)
	if err != nil {
		t.Fatalf("tokenizer from %s: %v", path, err)
	}
	tokCache[path] = tk
	return tk
}

type fixture struct {
	name    string // e.g. "llama-spm"
	gguf    string
	inputs  []string
	want    [][]int32 // nil when the vocabulary has no .inp/.out
	hasWant bool
}

// loadFixtures reads every ggml-vocab-*.gguf with its .inp/.out pair.
func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	dir := filepath.Join(testdataDir(t), "tokenizer")
	paths, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	if err != nil || len(paths) == 0 {
		t.Skipf("no vocab fixtures in %s", dir)
	}
	sort.Strings(paths)
	var fx []fixture
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "ggml-vocab-"), ".gguf")
		f := fixture{name: name, gguf: p}
		inp, err1 := os.ReadFile(p + ".inp")
		out, err2 := os.ReadFile(p + ".out")
		if err1 == nil && err2 == nil {
			f.inputs = splitInputs(string(inp))
			f.want = parseOut(t, string(out))
			f.hasWant = true
			if len(f.inputs) != len(f.want) {
				t.Fatalf("%s: %d inputs but %d expected lines", name, len(f.inputs), len(f.want))
			}
		}
		fx = append(fx, f)
	}
	return fx
}

func splitInputs(s string) []string {
	parts := strings.Split(s, "\n__ggml_vocab_test__\n")
	if len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

func parseOut(t testing.TB, s string) [][]int32 {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	out := make([][]int32, len(lines))
	for i, line := range lines {
		for _, f := range strings.Fields(line) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("bad id %q on line %d", f, i+1)
			}
			out[i] = append(out[i], int32(v))
		}
	}
	return out
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFixtures: every upstream test string encodes to the expected ids
// (add_special=false, parse_special=false).
func TestFixtures(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		if !fx.hasWant {
			continue
		}
		t.Run(fx.name, func(t *testing.T) {
			tk := loadGGUF(t, fx.gguf)
			pass := 0
			for i, s := range fx.inputs {
				got := tk.Encode(s, false, false)
				if equalIDs(got, fx.want[i]) {
					pass++
					continue
				}
				t.Errorf("string %d %q:\n got  %v\n want %v", i, s, got, fx.want[i])
			}
			t.Logf("%s: %d/%d strings match", fx.name, pass, len(fx.inputs))
		})
	}
}

// lossless reports whether Decode(Encode(s)) must give s back, and why not.
func lossless(tk *Tokenizer, s string) (bool, string) {
	for _, id := range tk.special {
		a := tk.attrs[id]
		if a&attrUserDefined == 0 || !strings.Contains(s, tk.texts[id]) {
			continue
		}
		// A matched user-defined token renders as its text, which is lossless,
		// except that SentencePiece puts a space prefix after it and the strip
		// flags drop whitespace around it.
		if tk.kind == kindSPM || a&(attrLStrip|attrRStrip) != 0 {
			return false, "contains a user-defined token text"
		}
	}
	if tk.kind == kindSPM {
		if strings.Contains(s, "\u2581") {
			return false, "SentencePiece decodes U+2581 as a space"
		}
		if spaceSwallowed(s) {
			return false, "a truncated UTF-8 lead byte absorbs part of an escaped space"
		}
		return true, ""
	}
	if !utf8.ValidString(s) {
		return false, "BPE replaces invalid UTF-8 with U+FFFD"
	}
	for i := 0; i < len(s); i++ {
		if _, ok := tk.toID[byteToUTF8[s[i]]]; !ok {
			return false, "the vocabulary has no token for a byte, which BPE then drops"
		}
	}
	return true, ""
}

// TestRoundTrip: Decode(Encode(s)) == s for every fixture string where the
// tokenizer is lossless, and the stream decoder agrees with Decode.
func TestRoundTrip(t *testing.T) {
	for _, fx := range loadFixtures(t) {
		inputs := fx.inputs
		if inputs == nil {
			inputs = defaultRoundTripInputs
		}
		t.Run(fx.name, func(t *testing.T) {
			tk := loadGGUF(t, fx.gguf)
			n := 0
			for _, s := range inputs {
				for _, special := range []bool{false, true} {
					ids := tk.Encode(s, special, false)
					dec := tk.Decode(ids)
					if ok, _ := lossless(tk, s); ok && !special {
						if dec != s {
							t.Errorf("round trip %q: got %q (ids %v)", s, dec, ids)
						}
						n++
					}
					checkStream(t, tk, ids, dec)
				}
			}
			t.Logf("%s: %d/%d strings round-trip", fx.name, n, len(inputs))
		})
	}
}

var defaultRoundTripInputs = []string{"", " ", "Hello world", "  two  spaces\n\n", "日本語 text 123456", "🦙🦙 emoji"}

// checkStream pushes ids one at a time and checks that every chunk is valid
// UTF-8 and that the concatenation equals Decode with invalid bytes as U+FFFD.
func checkStream(t testing.TB, tk *Tokenizer, ids []int32, dec string) {
	t.Helper()
	d := tk.NewStreamDecoder()
	var b strings.Builder
	for _, id := range ids {
		chunk := d.Push(id)
		if !utf8.ValidString(chunk) {
			t.Fatalf("stream chunk %q is not valid UTF-8 (ids %v)", chunk, ids)
		}
		b.WriteString(chunk)
	}
	b.WriteString(d.Flush())
	if want := string([]rune(dec)); b.String() != want {
		t.Errorf("stream %q != decode %q (ids %v)", b.String(), want, ids)
	}
}

type modelRef struct {
	Prompt     string   `json:"prompt"`
	PromptFile string   `json:"prompt_file"`
	Tokens     []int32  `json:"tokens"`
	Greedy     []int32  `json:"greedy"`
	Pieces     []string `json:"greedy_pieces"`
	GreedyText string   `json:"greedy_text"`
}

// TestModelPrompts: the reference prompt tokens of the tiny models (add_special
// = true, parse_special = false) and the pieces of their greedy outputs.
func TestModelPrompts(t *testing.T) {
	td := testdataDir(t)
	models, _ := filepath.Glob(filepath.Join(td, "models", "*.gguf"))
	if len(models) == 0 {
		t.Skip("no models in testdata")
	}
	for _, m := range models {
		name := strings.TrimSuffix(filepath.Base(m), ".gguf")
		t.Run(name, func(t *testing.T) {
			tk := loadGGUF(t, m)
			for _, which := range []string{"short", "long"} {
				raw, err := os.ReadFile(filepath.Join(td, "models", name+".ref", which+".json"))
				if err != nil {
					t.Fatalf("%s: %v", which, err)
				}
				var ref modelRef
				if err := json.Unmarshal(raw, &ref); err != nil {
					t.Fatalf("%s: %v", which, err)
				}
				prompt := ref.Prompt
				if ref.PromptFile != "" {
					b, err := os.ReadFile(filepath.Join(td, ref.PromptFile))
					if err != nil {
						t.Fatal(err)
					}
					prompt = string(b)
				}
				got := tk.Encode(prompt, true, false)
				if !equalIDs(got, ref.Tokens) {
					t.Errorf("%s prompt: got %d tokens %v\nwant %d tokens %v", which, len(got), got, len(ref.Tokens), ref.Tokens)
				}
				var text strings.Builder
				for i, id := range ref.Greedy {
					p := string(tk.Piece(id))
					text.WriteString(p)
					if i < len(ref.Pieces) && p != ref.Pieces[i] {
						t.Errorf("%s greedy piece %d (id %d): got %q want %q", which, i, id, p, ref.Pieces[i])
					}
				}
				if text.String() != ref.GreedyText {
					t.Errorf("%s greedy text: got %q want %q", which, text.String(), ref.GreedyText)
				}
			}
		})
	}
}

// spaceSwallowed reports whether SentencePiece's lead-byte grouping of the
// escaped text puts part of a space's U+2581 together with other bytes; those
// bytes then fall back to byte tokens and decode as "\u2581", not " ".
func spaceSwallowed(s string) bool {
	esc := strings.ReplaceAll(s, " ", "\u2581")
	fromSpace := make([]bool, len(esc))
	j := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			fromSpace[j], fromSpace[j+1], fromSpace[j+2] = true, true, true
			j += 3
		} else {
			j++
		}
	}
	for off := 0; off < len(esc); {
		n := min(utf8SeqLen(esc[off]), len(esc)-off)
		for k := off; k < off+n; k++ {
			if fromSpace[k] && (n != 3 || !fromSpace[off] || esc[off] != 0xE2) {
				return true
			}
		}
		off += n
	}
	return false
}
