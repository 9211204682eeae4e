package cli

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"nibble/catalog/vocab"
	"nibble/engine/ggml"
	"nibble/engine/synth"
)

func init() {
	Register(&Command{
		Name:  "synth",
		Usage: "--arch llama|qwen2|qwen3|gemma2|gemma3|gemma4|phi3|qwen3moe|mixtral|gptoss --layers N --embd N --heads N [--kv-heads N] [--head-dim N] --ff N [--experts N --experts-used K [--expert-ff N]] [--window N] [--vocab-from GGUF] [--type f16|q8_0|q4_0] [--seed S] [--ctx N] [--rope-base F] [--tied=true|false] [gemma4: --global-every N --head-dim-global N --kv-heads-global N --shared-kv-layers N --per-layer-embd N --global-v-from-k --partial-rotary F] -o OUT.gguf",
		Run:   synthCmd,
	})
}

func synthCmd(env *Env, args []string) error {
	fs := NewFlags(env, "synth")
	arch := fs.String("arch", "llama", "architecture: "+strings.Join(append(append([]string(nil), synth.Archs...), synth.Mixtral, synth.GptOss), ", ")+
		" (mixtral: llama with experts; gptoss: gpt-oss, its experts MXFP4)")
	layers := fs.Int("layers", 0, "number of transformer blocks")
	embd := fs.Int("embd", 0, "embedding width")
	heads := fs.Int("heads", 0, "attention heads")
	kvHeads := fs.Int("kv-heads", 0, "key/value heads (default: heads)")
	headDim := fs.Int("head-dim", 0, "attention head dim, written as key_length (default: embd/heads)")
	window := fs.Int("window", 0, "sliding window written as attention.sliding_window (default: 4096 gemma2, 1024 gemma3, none otherwise)")
	ff := fs.Int("ff", 0, "feed-forward width")
	vocabFrom := fs.String("vocab-from", "", "GGUF whose tokenizer is copied (`FILE.gguf`; default: the built-in 32000-token Llama SentencePiece vocabulary)")
	typ := fs.String("type", "f16", "type of the 2D weights: f16, q8_0 or q4_0")
	seed := fs.Uint64("seed", 1, "random seed (same seed, same file)")
	ctx := fs.Int("ctx", 4096, "context length written to the metadata")
	ropeBase := fs.Float64("rope-base", 0, "RoPE base (default 500000 llama, 1000000 qwen2/qwen3/gemma3, 10000 gemma2/phi3)")
	tied := fs.Bool("tied", false, "tie output to token_embd (default false for qwen2 and phi3, true otherwise; gemma always)")
	attnScale := fs.Float64("attn-scale", 0, "factor on q·k written as attention.scale (0: the usual 1/sqrt(head dim))")
	keyOutliers := fs.Int("key-outliers", 0, "outlier channels per KV head in attn_k (a stress case for quantized KV caches)")
	keyOutlierGain := fs.Float64("key-outlier-gain", 30, "how much --key-outliers scales those channels")
	globalEvery := fs.Int("global-every", 0, "gemma4: every Nth layer is global (default 5)")
	headDimGlobal := fs.Int("head-dim-global", 0, "gemma4: head dim of the global layers (default twice --head-dim)")
	kvHeadsGlobal := fs.Int("kv-heads-global", 0, "gemma4: kv heads of the global layers (default --kv-heads)")
	sharedKV := fs.Int("shared-kv-layers", 0, "gemma4: the last N layers read an earlier layer's KV cache")
	perLayerEmbd := fs.Int("per-layer-embd", 0, "gemma4: per-layer token embedding width (0: none)")
	globalVFromK := fs.Bool("global-v-from-k", false, "gemma4: global layers have no attn_v (v is k's projection)")
	partialRotary := fs.Float64("partial-rotary", 0, "gemma4: fraction of a global head RoPE rotates (default 0.25)")
	experts := fs.Int("experts", 0, "experts per block, a mixture of experts (default: 8 for qwen3moe, mixtral and gptoss, none otherwise)")
	expertsUsed := fs.Int("experts-used", 0, "experts chosen per token (default: 2 for qwen3moe, mixtral and gptoss)")
	expertFF := fs.Int("expert-ff", 0, "an expert's feed-forward width (qwen3moe, gptoss; mixtral's experts are --ff wide)")
	out := fs.String("o", "", "output `FILE.gguf`")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos[0])
	}
	if *out == "" || *layers == 0 || *embd == 0 || *heads == 0 || *ff == 0 {
		return fmt.Errorf("%w: need --layers, --embd, --heads, --ff and -o", ErrUsage)
	}
	// Lower bounds only: the upper ones and the shape rules (heads dividing embd, ...) are
	// synth's own checks.
	if err := checkIntFlags(
		intBound{"--layers", *layers, 1},
		intBound{"--embd", *embd, 1},
		intBound{"--heads", *heads, 1},
		intBound{"--kv-heads", *kvHeads, 0},
		intBound{"--head-dim", *headDim, 0},
		intBound{"--window", *window, 0},
		intBound{"--ff", *ff, 1},
		intBound{"--ctx", *ctx, 1},
		intBound{"--key-outliers", *keyOutliers, 0},
		intBound{"--global-every", *globalEvery, 0},
		intBound{"--head-dim-global", *headDimGlobal, 0},
		intBound{"--kv-heads-global", *kvHeadsGlobal, 0},
		intBound{"--shared-kv-layers", *sharedKV, 0},
		intBound{"--per-layer-embd", *perLayerEmbd, 0},
		intBound{"--experts", *experts, 0},
		intBound{"--experts-used", *expertsUsed, 0},
		intBound{"--expert-ff", *expertFF, 0},
	); err != nil {
		return err
	}
	if !(*ropeBase >= 0) || math.IsInf(*ropeBase, 0) {
		return fmt.Errorf("%w: --rope-base must be positive and finite (0: the default), got %g", ErrUsage, *ropeBase)
	}
	o := synth.DefaultOptions(*arch)
	if flagWasSet(fs, "tied") {
		o.TiedOutput = *tied
	}
	o.Layers, o.Embd, o.Heads, o.FF = *layers, *embd, *heads, *ff
	o.KVHeads, o.HeadDim, o.Window = *kvHeads, *headDim, *window
	if o.KVHeads == 0 {
		o.KVHeads = o.Heads
	}
	o.VocabFrom, o.Seed, o.Ctx = *vocabFrom, *seed, *ctx
	if o.VocabFrom == "" {
		o.VocabData = vocab.LlamaSPM
	}
	if *ropeBase != 0 {
		o.RopeBase = float32(*ropeBase)
	}
	if !(*attnScale >= 0 && *attnScale <= math.MaxFloat32) {
		return fmt.Errorf("%w: --attn-scale must be ≥ 0 and finite (0: 1/sqrt(head dim)), got %g", ErrUsage, *attnScale)
	}
	if !(*keyOutlierGain > 0 && *keyOutlierGain <= 1000) {
		return fmt.Errorf("%w: --key-outlier-gain must be in (0, 1000], got %g", ErrUsage, *keyOutlierGain)
	}
	o.AttnScale, o.KeyOutliers, o.KeyOutlierGain = float32(*attnScale), *keyOutliers, float32(*keyOutlierGain)
	if !(*partialRotary >= 0 && *partialRotary <= 1) {
		return fmt.Errorf("%w: --partial-rotary must be in [0, 1], got %g", ErrUsage, *partialRotary)
	}
	o.Gemma4 = synth.Gemma4Options{GlobalEvery: *globalEvery, HeadDimGlobal: *headDimGlobal, KVHeadsGlobal: *kvHeadsGlobal,
		SharedKVLayers: *sharedKV, PerLayerEmbd: *perLayerEmbd, GlobalVFromK: *globalVFromK, PartialRotary: float32(*partialRotary)}
	if *experts > 0 {
		o.Experts = *experts
	}
	if *expertsUsed > 0 {
		o.ExpertsUsed = *expertsUsed
	}
	if *expertFF > 0 {
		o.ExpertFF = *expertFF
	}
	if o.Type, err = parseSynthType(*typ); err != nil {
		return err
	}
	p := newSynthProgress(env.Stderr, "synth "+*out)
	o.Progress = p.update
	start := time.Now()
	err = synth.Generate(*out, o)
	p.finish()
	if err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s %d bytes (%.1f MiB) in %.1fs\n", *out, st.Size(), float64(st.Size())/(1<<20), time.Since(start).Seconds())
	return nil
}

func parseSynthType(s string) (ggml.Type, error) {
	t, err := ggml.ParseType(s)
	if err != nil || (t != ggml.F16 && t != ggml.Q8_0 && t != ggml.Q4_0) {
		return 0, fmt.Errorf("%w: --type %q: want f16, q8_0 or q4_0", ErrUsage, s)
	}
	return t, nil
}

// flagSet reports whether the flag was given on the command line.
func flagWasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// synthProgress shows progress on one updating line on a terminal, or a
// line per quarter otherwise (logs should not fill with carriage returns).
type synthProgress struct {
	w        io.Writer
	label    string
	tty      bool
	lastPct  int
	printed  bool
	quarters int
}

func newSynthProgress(w io.Writer, label string) *synthProgress {
	return &synthProgress{w: w, label: label, tty: isTerminalWriter(w), lastPct: -1}
}

func (p *synthProgress) update(done, total int64) {
	if total <= 0 {
		return
	}
	pct := int(done * 100 / total)
	if p.tty {
		if pct != p.lastPct {
			fmt.Fprintf(p.w, "\r%s: %3d%% (%d/%d MiB)", p.label, pct, done>>20, total>>20)
			p.lastPct, p.printed = pct, true
		}
		return
	}
	for p.quarters < 4 && pct >= (p.quarters+1)*25 {
		p.quarters++
		fmt.Fprintf(p.w, "%s: %d%% (%d/%d MiB)\n", p.label, p.quarters*25, done>>20, total>>20)
	}
}

func (p *synthProgress) finish() {
	if p.tty && p.printed {
		fmt.Fprintln(p.w)
	}
}

func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
