package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/sample"
	"nibble/engine/scheduler"
)

func init() {
	Register(&Command{
		Name:  "run",
		Usage: "-m MODEL [-p PROMPT | --chat] [-n N] [--ctx N] [--kv f16|q8|q4] [--kv-rotate auto|on|off] [--evict h2o:N|window:N] [--keep N] [--temp T] [--seed S] [--backend cpu|metal|auto] [--json]",
		Run:   runCmd,
	})
}

type runResult struct {
	Tokens       []int32           `json:"tokens"`
	Text         string            `json:"text"`
	Reasoning    string            `json:"reasoning,omitempty"` // a reasoning model's thinking, apart from Text
	PromptTokens int               `json:"prompt_tokens"`
	ReusedTokens int               `json:"reused_tokens"`
	GenTokens    int               `json:"gen_tokens"`
	PrefillTokS  float64           `json:"prefill_tok_s"`
	DecodeTokS   float64           `json:"decode_tok_s"`
	StopReason   engine.StopReason `json:"stop_reason"`
}

func runCmd(env *Env, args []string) error {
	fs := NewFlags(env, "run")
	var mf modelFlags
	mf.register(fs)
	mf.registerEvict(fs)
	prompt := fs.String("p", "", "prompt text (raw completion; with --chat, one chat turn)")
	promptFile := fs.String("prompt-file", "", "read the prompt from `FILE`")
	chatMode := fs.Bool("chat", false, "chat with the model's template (interactive on stdin without -p)")
	system := fs.String("system", "", "system message for --chat")
	n := fs.Int("n", -1, "tokens to generate (-1: 256 for -p, unlimited in chat)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past the end-of-turn token")
	keep := fs.Int("keep", 0, "when the prompt outgrows --ctx, keep its first `N` tokens and the most recent ones (0: stop with an error)")
	var stops multiFlag
	fs.Var(&stops, "stop", "stop `STRING` (repeatable)")
	sp := sample.Defaults()
	fs.Func("temp", "temperature (0 = greedy)", floatSetter(&sp.Temperature))
	fs.Func("top-p", "top-p", floatSetter(&sp.TopP))
	fs.Func("min-p", "min-p", floatSetter(&sp.MinP))
	fs.Func("repeat-penalty", "repetition penalty (1 = off)", floatSetter(&sp.RepeatPenalty))
	fs.IntVar(&sp.TopK, "top-k", sp.TopK, "top-k (0 = off)")
	fs.Uint64Var(&sp.Seed, "seed", 0, "sampling seed (0 = random)")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos[0])
	}
	if err := checkIntFlags(intBound{"-n", *n, -1}, intBound{"--keep", *keep, 0}, intBound{"--top-k", sp.TopK, 0}); err != nil {
		return err
	}
	if *prompt, err = promptText(*prompt, *promptFile); err != nil {
		return err
	}
	if *prompt == "" && !*chatMode {
		return fmt.Errorf("%w: give -p PROMPT, --prompt-file or --chat", ErrUsage)
	}
	if sp.Seed == 0 {
		sp.Seed = uint64(time.Now().UnixNano())
	}
	sched, info, err := mf.openScheduler(env)
	if err != nil {
		return err
	}
	defer sched.Close()
	interrupts, stopSignals := env.interrupts()
	defer stopSignals()
	gp := engine.GenParams{MaxTokens: *n, Sample: sp, Stop: stops, KeepOnOverflow: *keep, IgnoreEOS: *ignoreEOS}

	if *chatMode && *prompt == "" {
		if gp.MaxTokens < 0 {
			gp.MaxTokens = 0
		}
		return chatLoop(env, sched, info, interrupts, *system, gp)
	}
	if gp.MaxTokens < 0 {
		gp.MaxTokens = 256
	}
	req := scheduler.Request{Prompt: *prompt, Params: gp}
	if *chatMode {
		req = scheduler.Request{Messages: chatMessages(*system, []chat.Message{{Role: "user", Content: *prompt}}), Params: gp}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := sched.Submit(ctx, req)
	if err != nil {
		if errors.Is(err, engine.ErrContextFull) && *keep == 0 {
			return fmt.Errorf("%w, or pass --keep N to keep the first N tokens and the most recent ones", err)
		}
		return err
	}
	progress := prefillProgress(env, info.Options.Batch)
	var res *scheduler.Result
	for res == nil {
		select {
		case e, ok := <-events:
			if !ok { // closed without a final event: cancelled and not read in time
				res = &scheduler.Result{FinishReason: engine.StopCancelled, Stats: engine.Stats{StopReason: engine.StopCancelled}}
				break
			}
			switch e.Kind {
			case scheduler.Progress:
				progress(e.Prefilled, e.PromptTokens)
			case scheduler.Delta:
				if !*asJSON {
					// The thinking goes to stderr: stdout stays the answer.
					io.WriteString(env.Stderr, e.Reasoning)
					io.WriteString(env.Stdout, e.Text)
				}
			case scheduler.Final:
				res = e.Result
			}
		case <-interrupts:
			cancel()
		}
	}
	if *asJSON {
		out := runResult{Tokens: res.Tokens, Text: res.Text, Reasoning: res.Reasoning, PromptTokens: res.PromptTokens, ReusedTokens: res.ReusedTokens,
			GenTokens: res.GenTokens, PrefillTokS: res.PrefillTokPerSec, DecodeTokS: res.DecodeTokPerSec, StopReason: res.StopReason}
		if out.Tokens == nil {
			out.Tokens = []int32{}
		}
		if err := writeJSON(env.Stdout, out); err != nil {
			return err
		}
	} else if res.GenTokens > 0 {
		fmt.Fprintln(env.Stdout)
		fmt.Fprintf(env.Stderr, "[%d prompt tokens at %.1f tok/s, %d generated at %.1f tok/s, first token after %s, stop: %s; %s]\n",
			res.PrefillTokens, res.PrefillTokPerSec, res.GenTokens, res.DecodeTokPerSec, res.TimeToFirstToken.Round(time.Millisecond), res.StopReason,
			info.Options.KVLabel())
	}
	if res.FinishReason == engine.StopError {
		return res.Err
	}
	return nil // a Ctrl-C stop is not an error
}

// prefillProgress shows how far a long prompt has been read, on a terminal.
func prefillProgress(env *Env, batch int) func(done, total int) {
	if !isTerminalWriter(env.Stderr) {
		return func(int, int) {}
	}
	return func(done, total int) {
		if total > 2*batch { // only prompts that take a while
			fmt.Fprintf(env.Stderr, "\rreading the prompt: %d/%d tokens", done, total)
			if done == total {
				fmt.Fprint(env.Stderr, "\r\033[K")
			}
		}
	}
}

func chatMessages(system string, msgs []chat.Message) []chat.Message {
	if system == "" {
		return msgs
	}
	return append([]chat.Message{{Role: "system", Content: system}}, msgs...)
}

// chatLoop reads user turns from stdin; the engine's slot keeps the
// conversation's cache, so each turn prefills only its new tokens. When the
// conversation outgrows the context, the oldest turns are dropped (the
// system message stays), as Ollama and LM Studio do. Ctrl-C stops the reply
// being written and returns to the prompt; Ctrl-C at the prompt exits.
func chatLoop(env *Env, sched *scheduler.Scheduler, info scheduler.ModelInfo, interrupts <-chan os.Signal, system string, gp engine.GenParams) error {
	if env.Stdin == nil {
		return fmt.Errorf("%w: --chat without -p needs standard input", ErrUsage)
	}
	lines := readLines(env.Stdin)
	ctxBudget := info.Options.Ctx
	// Room kept for the reply when the turn's length is not capped.
	reserve := gp.MaxTokens
	if reserve <= 0 {
		reserve = min(512, ctxBudget/4)
	}
	var history []chat.Message
	for {
		drain(interrupts) // a Ctrl-C that came as a reply ended is not meant for the prompt
		fmt.Fprint(env.Stderr, "> ")
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(env.Stderr)
				return nil
			}
			line = strings.TrimSpace(l)
		case <-interrupts:
			fmt.Fprintln(env.Stderr)
			return nil
		}
		if line == "" {
			continue
		}
		history = append(history, chat.Message{Role: "user", Content: line})
		for {
			ids, err := sched.Tokenize(scheduler.Request{Messages: chatMessages(system, history)})
			if err != nil {
				return err
			}
			if len(ids)+reserve <= ctxBudget || len(history) <= 1 {
				break
			}
			history = history[2:] // the oldest user turn and its reply
			fmt.Fprintln(env.Stderr, "[dropped the oldest turn to stay within the context]")
		}
		res, shown, err := chatTurn(env, sched, interrupts, chatMessages(system, history), gp)
		if err != nil {
			if errors.Is(err, engine.ErrContextFull) {
				return fmt.Errorf("%w: this message alone does not fit; raise --ctx", err)
			}
			return err
		}
		fmt.Fprintln(env.Stdout)
		if res.FinishReason == engine.StopCancelled {
			fmt.Fprintln(env.Stderr, "[stopped]")
		}
		fmt.Fprintf(env.Stderr, "[reused %d, prefilled %d, generated %d at %.1f tok/s]\n",
			res.ReusedTokens, res.PrefillTokens, res.GenTokens, res.DecodeTokPerSec)
		// A stopped reply stays in the conversation as far as the user saw it.
		history = append(history, chat.Message{Role: "assistant", Content: shown})
	}
}

// chatTurn streams one reply; an interrupt cancels it. It returns the
// result and the text that was shown.
func chatTurn(env *Env, sched *scheduler.Scheduler, interrupts <-chan os.Signal, msgs []chat.Message, gp engine.GenParams) (*scheduler.Result, string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := sched.Submit(ctx, scheduler.Request{Messages: msgs, Params: gp})
	if err != nil {
		return nil, "", err
	}
	var shown strings.Builder
	for {
		select {
		case e, ok := <-events:
			if !ok { // closed without a final event: cancelled and not read in time
				return &scheduler.Result{FinishReason: engine.StopCancelled}, shown.String(), nil
			}
			switch e.Kind {
			case scheduler.Delta:
				io.WriteString(env.Stderr, e.Reasoning)
				io.WriteString(env.Stdout, e.Text)
				shown.WriteString(e.Text)
			case scheduler.Final:
				if e.Result.FinishReason == engine.StopError {
					return e.Result, shown.String(), e.Result.Err
				}
				return e.Result, shown.String(), nil
			}
		case <-interrupts:
			cancel()
		}
	}
}

// drain discards pending interrupts.
func drain(ch <-chan os.Signal) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// readLines delivers stdin's lines on a channel, closed at end of input, so
// the prompt can wait for a line and for Ctrl-C at once.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		in := bufio.NewScanner(r)
		in.Buffer(make([]byte, 1<<20), 1<<20)
		for in.Scan() {
			ch <- in.Text()
		}
	}()
	return ch
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func floatSetter(dst *float32) func(string) error {
	return func(s string) error {
		var v float64
		if _, err := fmt.Sscanf(s, "%g", &v); err != nil {
			return fmt.Errorf("not a number: %q", s)
		}
		*dst = float32(v)
		return nil
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}
