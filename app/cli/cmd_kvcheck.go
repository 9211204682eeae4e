package cli

import (
	"fmt"
	"path/filepath"

	"nibble/engine"
	"nibble/engine/cpu"
	"nibble/engine/eval"
	"nibble/engine/kv"
	"nibble/engine/kvprobe"
)

func init() {
	Register(&Command{
		Name:  "kvcheck",
		Usage: "-m MODEL --prompt-file F [--batch 1] [--greedy 24] [--kv-group 32] [--kv-rotate auto|on|off] [--smooth=false] [--kv-residual N] [--json]",
		Run:   kvcheckCmd,
	})
}

func kvcheckCmd(env *Env, args []string) error {
	fs := NewFlags(env, "kvcheck")
	path := fs.String("m", "", "model `FILE.gguf`")
	promptFile := fs.String("prompt-file", "", "prompt `FILE`")
	batch := fs.Int("batch", 1, "prompt rows per forward call (1: every position reads the quantized cache)")
	greedy := fs.Int("greedy", 24, "greedy continuation length compared")
	group := fs.Int("kv-group", kv.DefaultGroupSize, "quantization group: 32 or 64")
	threads := fs.Int("threads", 0, "CPU threads (0 = all cores)")
	rotate := kv.RotateAuto
	fs.Var(rotateFlag{&rotate}, "kv-rotate", rotateUsage)
	fs.Var(rotateSwitch{rotateFlag{&rotate}}, "rotate", "the same as --kv-rotate on (kept from before --kv-rotate)")
	smooth := fs.Bool("smooth", true, "scale quantized K per channel, calibrated on the prompt (docs/ARCHITECTURE.md, Channel smoothing)")
	residual := fs.Int("kv-residual", -1, "f16 residual window of the quantized caches in positions (-1: each type's default, 0: none)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := ParseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" || *promptFile == "" {
		return fmt.Errorf("%w: need -m MODEL and --prompt-file F", ErrUsage)
	}
	if err := checkIntFlags(intBound{"--batch", *batch, 1}, intBound{"--greedy", *greedy, 0}, intBound{"--threads", *threads, 0}); err != nil {
		return err
	}
	if err := checkKVGroup(*group); err != nil {
		return err
	}
	if _, err := residualOption(*residual); err != nil {
		return err
	}
	text, err := promptText("", *promptFile)
	if err != nil {
		return err
	}
	b := cpu.New(*threads)
	defer b.Close()
	m, err := engine.LoadModel(*path, b)
	if err != nil {
		return err
	}
	defer m.Close()
	ids := m.EncodePrompt(text)
	rep, err := kvprobe.MeasureQuality(m, b, ids, []kv.Type{kv.Q8, kv.Q4},
		kvprobe.QualityOptions{Batch: *batch, Greedy: *greedy, GroupSize: *group, Rotate: rotate, NoSmooth: !*smooth, Residual: *residual})
	if err != nil {
		return err
	}
	types, rotated := map[string]*kvprobe.Quality{}, map[string]bool{}
	for t, q := range rep.Types {
		types[t.String()], rotated[t.String()] = q, rep.Rotated[t]
	}
	label := func(t kv.Type) string {
		if rep.Rotated[t] {
			return t.String() + " (rotated)"
		}
		return t.String()
	}
	checks := eval.CheckThresholds(rep.Types, eval.TrainedModelThresholds)
	if *asJSON {
		return writeJSON(env.Stdout, map[string]any{"model": filepath.Base(*path), "tokens": len(ids),
			"batch": *batch, "kv_group": *group, "rotate": rotate.String(), "rotated": rotated, "smooth": *smooth, "kv_residual": *residual, "types": types,
			"noise_floor": map[string]any{"batch": rep.FloorBatch, "f16": rep.Floor}, "thresholds": checks})
	}
	fmt.Fprintf(env.Stdout, "%s, %d prompt tokens, batch %d, KV vs f16 (group %d):\n", filepath.Base(*path), len(ids), *batch, *group)
	fmt.Fprintf(env.Stdout, "%-14s %10s %8s %10s %8s %8s\n", "kv", "cosine", "top-1", "max|Δ|", "greedy", "forced")
	row := func(name string, q *kvprobe.Quality) {
		fmt.Fprintf(env.Stdout, "%-14s %10.6f %7.1f%% %10.4f %5d/%d %5d/%d\n", name, q.Cosine, 100*q.Top1Agreement, q.MaxAbsDLogit,
			q.GreedyAgree, q.GreedyTotal, q.GreedyForced, q.GreedyTotal)
	}
	for _, t := range []kv.Type{kv.Q8, kv.Q4} {
		row(label(t), rep.Types[t])
	}
	row(fmt.Sprintf("f16 batch %d", rep.FloorBatch), rep.Floor)
	fmt.Fprintln(env.Stdout, "(last row: f16 against itself at another batch size, the noise floor)")
	fmt.Fprintf(env.Stdout, "trained-model thresholds for --kv-rotate %s (meant for --batch 1 on a trained model; random weights need not meet them):\n", rotate)
	for _, c := range checks {
		verdict := "FAIL"
		if c.Pass {
			verdict = "pass"
		}
		fmt.Fprintf(env.Stdout, "  %-14s %-7s %-10s %-10s %s\n", label(c.Type), c.Metric, c.Value, c.Want, verdict)
	}
	return nil
}
