package service

import (
	"os"
	"path/filepath"
	"testing"

	"nibble/engine/ggml"
	"nibble/engine/synth"
	"nibble/internal/testdata"
)

// Every model family loads in the app and answers a chat through Send (the
// engine scheduler), with its architecture in the model's info: the tiny
// Qwen3, Gemma 2 and Gemma 3 fixtures and a Phi-3 written here. KV is
// auto, as in the app, so the KV check runs on each family too.
func TestEveryFamilyLoadsAndAnswers(t *testing.T) {
	td := testdata.Dir(t)
	phi3 := filepath.Join(t.TempDir(), "tiny-phi3-f16.gguf")
	cases := []struct{ arch, path string }{
		{"qwen3", filepath.Join(td, "families", "tiny-qwen3-f16.gguf")},
		{"gemma2", filepath.Join(td, "families", "tiny-gemma2-f16.gguf")},
		{"gemma3", filepath.Join(td, "families", "tiny-gemma3-f16.gguf")},
		{"phi3", phi3},
	}
	s, rec := autoService(t)
	for _, tc := range cases {
		t.Run(tc.arch, func(t *testing.T) {
			if tc.arch == "phi3" {
				vocabFile := filepath.Join(td, "tokenizer", "ggml-vocab-phi-3.gguf")
				if _, err := os.Stat(vocabFile); err != nil {
					t.Skipf("skipping: the Phi-3 vocabulary is not at %s", vocabFile)
				}
				o := synth.DefaultOptions("phi3")
				o.Layers, o.Embd, o.Heads, o.KVHeads, o.FF = 2, 128, 2, 1, 384
				o.Type, o.Seed, o.Ctx, o.VocabFrom = ggml.F16, 104, 4096, vocabFile
				if err := synth.Generate(tc.path, o); err != nil {
					t.Fatal(err)
				}
			} else if _, err := os.Stat(tc.path); err != nil {
				t.Skipf("skipping: the %s fixture is not at %s", tc.arch, tc.path)
			}
			st, err := s.LoadModel(LoadRequest{Path: tc.path, Ctx: 1024})
			if err != nil {
				t.Fatal(err)
			}
			m := st.Model
			if st.State != StateReady || m == nil || m.Arch != tc.arch || m.Path != tc.path || m.KVLabel == "" {
				t.Fatalf("after the load: state %s model %+v", st.State, m)
			}
			res, err := s.Send(SendRequest{Messages: []Message{{Role: "user", Content: "Where does the river meet the sea?"}}, MaxTokens: 12})
			if err != nil {
				t.Fatal(err)
			}
			f := rec.final(t)
			if f.ID != res.ReplyID || f.Error != "" || (f.FinishReason != "length" && f.FinishReason != "stop") || f.GenTokens == 0 || f.PromptTokens == 0 {
				t.Fatalf("reply: %+v", f)
			}
			if got := rec.text(res.ReplyID); got != f.Text {
				t.Fatalf("streamed %q, final text %q", got, f.Text)
			}
			t.Logf("%s (%s, %s, template %s): %d prompt tokens, %d generated (%s), %.0f tok/s: %q",
				m.Name, m.Arch, m.KVLabel, m.Template, f.PromptTokens, f.GenTokens, f.FinishReason, f.DecodeTokPerSec, f.Text)
			st = waitKVCheck(t, s, false)
			if k := st.Model.KVCheck; k.State != KVCheckDone || k.Error != "" || len(k.Rows) != 3 {
				t.Fatalf("KV check on %s: %+v", tc.arch, k)
			}
			t.Logf("KV check: %s", st.Model.KVCheck.Summary)
		})
	}
}
