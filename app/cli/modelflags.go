package cli

import (
	"flag"
	"fmt"
	"runtime"
	"strconv"

	"nibble/app/backends"
	"nibble/engine"
	"nibble/engine/backend"
	"nibble/engine/estimate"
	"nibble/engine/kv"
	"nibble/engine/scheduler"
)

// modelFlags are the options every model-running command shares.
type modelFlags struct {
	path    string
	threads int
	ctx     int
	batch   int
	kvType  string
	kvGroup int
	rotate  kv.RotateMode
	smooth  bool
	kvTail  int // --kv-residual: -1 the type's default, 0 none
	ram     string
	backend string
	evict   string // --evict (registerEvict): "" none
}

func (mf *modelFlags) register(fs *flag.FlagSet) {
	mf.registerModel(fs)
	fs.StringVar(&mf.kvType, "kv", "q4", "KV cache type: f16, q8 or q4")
	fs.Var(rotateFlag{&mf.rotate}, "kv-rotate", rotateUsage)
}

// kvModesUsage is the help of needle's and perplexity's --kv (eval.ParseKVModes).
const kvModesUsage = "KV modes to compare, comma-separated: f16, q8 and q4 as sessions run them (q4 with K rotated, q8 without), and q8 or q4 ending in -rot or -plain for K rotated or not"

// rotateUsage is --kv-rotate's help, for every command that has it.
const rotateUsage = "store K rotated (docs/ARCHITECTURE.md, Rotation): `MODE` auto (the default: q4 only, where the backend rotates the head dim), on or off"

// rotateFlag is --kv-rotate: auto, on or off (true and false, from when
// it was a switch, mean on and off).
type rotateFlag struct{ mode *kv.RotateMode }

func (f rotateFlag) String() string {
	if f.mode == nil {
		return kv.RotateAuto.String()
	}
	return f.mode.String()
}

func (f rotateFlag) Set(s string) error {
	if b, err := strconv.ParseBool(s); err == nil {
		*f.mode = map[bool]kv.RotateMode{true: kv.RotateOn, false: kv.RotateOff}[b]
		return nil
	}
	m, err := kv.ParseRotateMode(s)
	if err != nil {
		return err
	}
	*f.mode = m
	return nil
}

// rotateSwitch is kvcheck's --rotate, kept from before --kv-rotate: on
// when given (--rotate=false: off).
type rotateSwitch struct{ rotateFlag }

func (rotateSwitch) IsBoolFlag() bool { return true }

// registerModel registers every shared flag but --kv and --kv-rotate, for
// the benches that take a list of KV modes instead.
func (mf *modelFlags) registerModel(fs *flag.FlagSet) {
	mf.kvType = "f16"
	fs.StringVar(&mf.path, "m", "", "model `FILE.gguf`")
	fs.StringVar(&mf.path, "model", "", "model `FILE.gguf`")
	fs.IntVar(&mf.threads, "threads", 0, "CPU threads (0 = all cores)")
	fs.IntVar(&mf.threads, "t", 0, "CPU threads (0 = all cores)")
	fs.IntVar(&mf.ctx, "ctx", 0, "context budget in tokens (0 = min(trained, 4096))")
	fs.IntVar(&mf.ctx, "c", 0, "context budget in tokens")
	fs.IntVar(&mf.batch, "batch", 512, "prefill batch size")
	fs.IntVar(&mf.kvGroup, "kv-group", kv.DefaultGroupSize, "KV quantization group: 32 or 64")
	fs.BoolVar(&mf.smooth, "kv-smooth", true, "scale quantized K per channel, calibrated on the prompt (tames outlier key channels)")
	fs.IntVar(&mf.kvTail, "kv-residual", -1, "keep the most recent N positions of a quantized KV cache in f16 as well (-1: the type's default, 0: none)")
	fs.StringVar(&mf.ram, "ram", "", "simulate a machine with this memory `SIZE` (e.g. 8GiB) instead of probing")
	fs.StringVar(&mf.backend, "backend", backends.Auto, "run on `cpu`, metal or auto (Metal on a Mac with a GPU, else the CPU)")
}

func (mf *modelFlags) options() (engine.Options, error) {
	if err := checkIntFlags(intBound{"--ctx", mf.ctx, 0}, intBound{"--threads", mf.threads, 0}, intBound{"--batch", mf.batch, 1}); err != nil {
		return engine.Options{}, err
	}
	t, err := kv.ParseType(mf.kvType)
	if err != nil {
		return engine.Options{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if err := checkKVGroup(mf.kvGroup); err != nil {
		return engine.Options{}, err
	}
	if _, err := backends.Parse(mf.backend); err != nil {
		return engine.Options{}, fmt.Errorf("%w: --backend must be cpu, metal or auto, got %q", ErrUsage, mf.backend)
	}
	residual, err := residualOption(mf.kvTail)
	if err != nil {
		return engine.Options{}, err
	}
	o := engine.Options{Ctx: mf.ctx, Batch: mf.batch, KV: t, KVGroup: mf.kvGroup, KVRotate: mf.rotate, KVNoSmooth: !mf.smooth, KVResidual: residual}
	if err := mf.applyEvict(&o); err != nil {
		return engine.Options{}, err
	}
	if mf.ram != "" {
		n, err := estimate.ParseSize(mf.ram)
		if err != nil {
			return engine.Options{}, fmt.Errorf("%w: --ram: %v", ErrUsage, err)
		}
		b := estimate.Simulated(n)
		o.Budget = &b
	}
	return o, nil
}

// newBackend makes the backend --backend asks for (backends.Choose): on auto,
// Metal on a Mac with a GPU, else the CPU on --threads. --backend metal
// where there is no Metal is an error that says why.
func (mf *modelFlags) newBackend() (backend.Backend, backends.Choice, error) {
	return backends.Choose(mf.backend, mf.threads)
}

// warnFallback says so when auto fell back to the CPU on a Mac (elsewhere
// the CPU is the only choice and needs no word).
func (mf *modelFlags) warnFallback(env *Env, c backends.Choice) {
	if want, _ := backends.Parse(mf.backend); runtime.GOOS == "darwin" && want == backends.Auto && c.Backend == backends.CPU {
		fmt.Fprintf(env.Stderr, "warning: running on the CPU: %s\n", c.Reason)
	}
}

// open loads the model and starts a session on the chosen backend (for the
// measuring commands, which drive one session directly).
func (mf *modelFlags) open(env *Env) (*engine.Session, func(), error) {
	m, o, closeModel, err := mf.load(env)
	if err != nil {
		return nil, nil, err
	}
	s, err := engine.NewSession(m, m.Backend, o)
	if err != nil {
		closeModel()
		return nil, nil, err
	}
	warnAboveTrained(env, s.Opts.Ctx, m.HP.CtxTrain)
	return s, func() { s.Close(); closeModel() }, nil
}

// load checks the flags and loads the model on the chosen backend, for
// commands that start their sessions themselves (one per KV mode). The
// returned function closes the model and the backend.
func (mf *modelFlags) load(env *Env) (*engine.Model, engine.Options, func(), error) {
	if mf.path == "" {
		return nil, engine.Options{}, nil, fmt.Errorf("%w: -m MODEL is required", ErrUsage)
	}
	o, err := mf.options()
	if err != nil {
		return nil, o, nil, err
	}
	b, choice, err := mf.newBackend()
	if err != nil {
		return nil, o, nil, err
	}
	mf.warnFallback(env, choice)
	m, err := engine.LoadModel(mf.path, b)
	if err != nil {
		b.Close()
		return nil, o, nil, err
	}
	return m, o, func() { m.Close(); b.Close() }, nil
}

// openScheduler loads the model into an engine scheduler with one slot:
// the path the app and the local server take too.
func (mf *modelFlags) openScheduler(env *Env) (*scheduler.Scheduler, scheduler.ModelInfo, error) {
	if mf.path == "" {
		return nil, scheduler.ModelInfo{}, fmt.Errorf("%w: -m MODEL is required", ErrUsage)
	}
	o, err := mf.options()
	if err != nil {
		return nil, scheduler.ModelInfo{}, err
	}
	b, choice, err := mf.newBackend()
	if err != nil {
		return nil, scheduler.ModelInfo{}, err
	}
	mf.warnFallback(env, choice)
	s := scheduler.New(scheduler.Config{Slots: 1, Threads: mf.threads, NewBackend: func() backend.Backend { return b }})
	info, err := s.Load(mf.path, o)
	if err != nil {
		s.Close()
		return nil, info, err
	}
	warnAboveTrained(env, info.Options.Ctx, info.CtxTrain)
	if info.TemplateProblem != "" {
		fmt.Fprintf(env.Stderr, "warning: %s\n", info.TemplateProblem)
	}
	return s, info, nil
}

// warnAboveTrained allows a context beyond the trained one (RoPE scaling
// may be intended) but says so.
func warnAboveTrained(env *Env, ctx, trained int) {
	if trained > 0 && ctx > trained {
		fmt.Fprintf(env.Stderr, "warning: --ctx %d is above the model's trained context of %d; expect worse output past %d tokens unless the model is meant for RoPE scaling\n", ctx, trained, trained)
	}
}

// residualOption maps --kv-residual (-1 default, 0 none, N positions) to
// engine.Options.KVResidual (0 default, negative none).
func residualOption(flagValue int) (int, error) {
	switch {
	case flagValue < -1 || flagValue > kv.MaxResidual:
		return 0, fmt.Errorf("%w: --kv-residual must be -1 (default), 0 (none) or up to %d positions, got %d", ErrUsage, kv.MaxResidual, flagValue)
	case flagValue == -1:
		return 0, nil
	case flagValue == 0:
		return -1, nil
	}
	return flagValue, nil
}
