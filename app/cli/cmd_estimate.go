package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"nibble/catalog"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/sysmem"
)

func init() {
	Register(&Command{
		Name:  "estimate",
		Usage: "(-m FILE.gguf | --url URL | --catalog ID [--quant Q]) [--ctx N] [--kv f16|q8|q4] [--kv-group 32|64] [--batch N] [--threads N] [--backend cpu|metal] [--ram SIZE] [--overhead SIZE] [--json]",
		Run:   estimateCmd,
	})
}

func estimateCmd(env *Env, args []string) error {
	fs := NewFlags(env, "estimate")
	path := fs.String("m", "", "local model `FILE.gguf` (header only)")
	url := fs.String("url", "", "remote GGUF `URL` (header only, by HTTP range requests)")
	catalogID := fs.String("catalog", "", "catalog model `ID` (approximate weights)")
	quant := fs.String("quant", "", "catalog file `TYPE` (default: the first listed)")
	ctx := fs.Int("ctx", 0, "context in tokens (0 = min(trained, 4096), as nibble run)")
	kvName := fs.String("kv", "q4", "KV cache type the verdict and advice are for: f16, q8 or q4")
	kvGroup := fs.Int("kv-group", kv.DefaultGroupSize, "KV quantization group: 32 or 64")
	batch := fs.Int("batch", 512, "prefill batch size")
	threads := fs.Int("threads", 0, "CPU threads (0 = all cores)")
	backendName := fs.String("backend", "cpu", "backend: cpu or metal")
	ram := fs.String("ram", "", "simulate a machine with exactly `SIZE` usable (e.g. 64GiB)")
	overhead := fs.String("overhead", "", "runtime overhead `SIZE` instead of the measured constant")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos[0])
	}
	sources := 0
	for _, s := range []string{*path, *url, *catalogID} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return fmt.Errorf("%w: give exactly one of -m FILE, --url URL or --catalog ID", ErrUsage)
	}
	kt, err := kv.ParseType(*kvName)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := checkKVGroup(*kvGroup); err != nil {
		return err
	}
	if err := checkIntFlags(intBound{"--ctx", *ctx, 0}, intBound{"--batch", *batch, 1}, intBound{"--threads", *threads, 0}); err != nil {
		return err
	}
	o := estimate.Options{Ctx: *ctx, KV: kt, KVGroup: *kvGroup, Batch: *batch, Backend: *backendName, Threads: *threads}
	if *overhead != "" {
		if o.Overhead, err = estimate.ParseSize(*overhead); err != nil || o.Overhead <= 0 {
			return fmt.Errorf("%w: --overhead: %v", ErrUsage, errOr(err, "must be positive"))
		}
	}
	if _, err := estimate.BackendOverhead(o.Backend); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}

	var b estimate.Budget
	var machine string
	if *ram != "" {
		n, err := estimate.ParseSize(*ram)
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: --ram: %v", ErrUsage, errOr(err, "must be positive"))
		}
		b = estimate.Simulated(n)
		machine = "simulated (--ram)"
	} else {
		info, err := sysmem.Probe()
		if err != nil {
			return err
		}
		b = estimate.FromSystem(info)
		machine = describeMachine(info)
	}

	d, err := describeModel(*path, *url, *catalogID, *quant)
	if err != nil {
		return err
	}
	r, err := estimate.NewReport(d, o, b)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		return enc.Encode(r.JSON())
	}
	printReport(env.Stdout, r, machine, *overhead != "")
	return nil
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

func describeModel(path, url, catalogID, quant string) (estimate.Desc, error) {
	switch {
	case path != "":
		return estimate.FromFile(path)
	case url != "":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return estimate.FromURL(ctx, nil, url)
	}
	m, err := catalog.ByID(catalogID)
	if err != nil {
		return estimate.Desc{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return estimate.FromCatalog(m, quant)
}

func describeMachine(info sysmem.Info) string {
	gib := func(n uint64) string { return estimate.GiB(int64(min(n, 1<<62))) }
	s := fmt.Sprintf("this machine (%s): %s available of %s RAM", info.OS, gib(info.AvailableRAM), gib(info.TotalRAM))
	if info.CgroupLimit > 0 {
		s += fmt.Sprintf(", cgroup limit %s with %s in use", gib(info.CgroupLimit), gib(info.CgroupUsage))
	}
	if info.OS == "darwin" {
		s += fmt.Sprintf(", GPU cap %s", gib(info.GPUCap()))
		if info.WiredLimitMB == 0 {
			s += " (default wired limit)"
		} else {
			s += fmt.Sprintf(" (iogpu.wired_limit_mb=%d)", info.WiredLimitMB)
		}
	}
	return s
}

func printReport(w io.Writer, r *estimate.Report, machine string, overheadGiven bool) {
	d, o := r.Desc, r.Opts
	weights := "weights exact, from the header"
	switch {
	case !d.Exact:
		weights = "weights approximate: listed file size"
	case strings.HasPrefix(d.Source, "catalog:"):
		weights = "weights exact, from the catalog"
	}
	ft := d.FileType
	if ft == "" {
		ft = "unknown type"
	}
	fmt.Fprintf(w, "model     %s (%s, %s; %s)\n", d.Name, d.Source, ft, weights)
	hp := d.HParams
	fmt.Fprintf(w, "shape     %s: %d layers, %d heads / %d kv heads × %d, embd %d, ff %d, vocab %d, trained ctx %d",
		hp.Arch, hp.Layers, hp.Heads, hp.KVHeads, hp.HeadDim, hp.Embd, hp.FF, hp.Vocab, hp.CtxTrain)
	if hp.Window > 0 {
		fmt.Fprintf(w, ", window %d", hp.Window)
	}
	if d.Experts.Count > 0 {
		fmt.Fprintf(w, ", %d experts (%d per token)", d.Experts.Count, d.Experts.Used)
	}
	if !d.Runnable {
		fmt.Fprint(w, " (not yet runnable by this engine)")
	}
	fmt.Fprintln(w)
	if d.SparseRead() {
		// Every expert stays mapped, since any token may route to it; the
		// fit counts them all, the speed only what a token reads.
		how := "(embedding tables are only looked up)"
		if d.Experts.Count > 0 {
			how = fmt.Sprintf("(%d of %d experts)", d.Experts.Used, d.Experts.Count)
		}
		read := estimate.Human(d.ActiveBytes)
		if strings.HasPrefix(d.Source, "catalog:") {
			read = "≈ " + read // the model card's active share of the file
		}
		fmt.Fprintf(w, "weights   %s resident, %s read per token %s\n", estimate.Human(d.WeightsBytes), read, how)
	}
	fmt.Fprintf(w, "run       --ctx %d, batch %d, backend %s, %d threads, KV group %d\n", o.Ctx, o.Batch, o.Backend, o.Threads, o.KVGroup)
	over := "measured constant"
	if overheadGiven {
		over = "--overhead"
	}
	fmt.Fprintf(w, "budget    %s, %s (overhead: %s)\n\n", estimate.GiB(r.Budget.Bytes), machine, over)

	cols := make([]string, len(kv.Types))
	for i, t := range kv.Types {
		cols[i] = t.String()
		if t == o.KV {
			cols[i] = "[" + cols[i] + "]"
		}
	}
	row := func(label string, cell func(e *estimate.Estimate) string) {
		fmt.Fprintf(w, "%-13s", label)
		for _, e := range r.Types {
			v := "n/a"
			if e != nil {
				v = cell(e)
			}
			fmt.Fprintf(w, "%14s", v)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-13s", "KV type")
	for _, c := range cols {
		fmt.Fprintf(w, "%14s", c)
	}
	fmt.Fprintln(w)
	row("weights", func(e *estimate.Estimate) string { return estimate.Human(e.Weights) })
	row("KV cache", func(e *estimate.Estimate) string { return estimate.Human(e.KV) })
	row("scratch", func(e *estimate.Estimate) string { return estimate.Human(e.Scratch) })
	row("overhead", func(e *estimate.Estimate) string { return estimate.Human(e.Overhead) })
	row("total", func(e *estimate.Estimate) string { return estimate.Human(e.Total) })
	row("of budget", func(e *estimate.Estimate) string {
		return fmt.Sprintf("%.1f%%", 100*float64(e.Total)/float64(max(1, e.Budget)))
	})
	row("verdict", func(e *estimate.Estimate) string { return e.Verdict.String() })
	row("max context", func(e *estimate.Estimate) string { return fmt.Sprint(e.MaxCtx) })
	if len(r.Advice) > 0 {
		fmt.Fprintf(w, "\nadvice (for --kv %s):\n", o.KV)
		for _, a := range r.Advice {
			fmt.Fprintf(w, "  - %s\n", strings.TrimSpace(a))
		}
	}
}
