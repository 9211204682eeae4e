package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"nibble/engine"
	"nibble/engine/chat"
	"nibble/engine/sample"
)

func init() {
	Register(&Command{
		Name:  "run",
		Usage: "-m MODEL [-p PROMPT | --chat] [-n N] [--ctx N] [--kv f16|q8|q4] [--keep N] [--temp T] [--seed S] [--json]",
		Run:   runCmd,
	})
}

type runResult struct {
	Tokens       []int32 `json:"tokens"`
	Text         string  `json:"text"`
	PromptTokens int     `json:"prompt_tokens"`
	ReusedTokens int     `json:"reused_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	StopReason   string  `json:"stop_reason"`
}

func runCmd(env *Env, args []string) error {
	fs := NewFlags(env, "run")
	var mf modelFlags
	mf.register(fs)
	prompt := fs.String("p", "", "prompt text (raw completion; with --chat, one chat turn)")
	promptFile := fs.String("prompt-file", "", "read the prompt from `FILE`")
	chatMode := fs.Bool("chat", false, "chat with the model's template (interactive on stdin without -p)")
	system := fs.String("system", "", "system message for --chat")
	n := fs.Int("n", -1, "tokens to generate (-1: 256 for -p, unlimited in chat)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
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
	if *prompt, err = promptText(*prompt, *promptFile); err != nil {
		return err
	}
	if *prompt == "" && !*chatMode {
		return fmt.Errorf("%w: give -p PROMPT, --prompt-file or --chat", ErrUsage)
	}
	if sp.Seed == 0 {
		sp.Seed = uint64(time.Now().UnixNano())
	}
	s, closeAll, err := mf.open()
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if isTerminalWriter(env.Stderr) {
		s.PrefillProgress = func(done, total int) {
			if total > 2*s.Opts.Batch { // only prompts that take a while
				fmt.Fprintf(env.Stderr, "\rreading the prompt: %d/%d tokens", done, total)
				if done == total {
					fmt.Fprint(env.Stderr, "\r\033[K")
				}
			}
		}
	}
	gp := engine.GenParams{MaxTokens: *n, Sample: sp, Stop: stops, KeepOnOverflow: *keep}

	if *chatMode && *prompt == "" {
		if gp.MaxTokens < 0 {
			gp.MaxTokens = 0
		}
		return chatLoop(ctx, env, s, *system, gp)
	}
	if gp.MaxTokens < 0 {
		gp.MaxTokens = 256
	}
	var ids []int32
	if *chatMode {
		ids, err = s.M.EncodeChat(chatMessages(*system, []chat.Message{{Role: "user", Content: *prompt}}))
		if err != nil {
			return err
		}
	} else {
		ids = s.M.EncodePrompt(*prompt)
	}
	var onEvent func(engine.Event) error
	if !*asJSON {
		onEvent = func(e engine.Event) error { _, err := io.WriteString(env.Stdout, e.Text); return err }
	}
	st, genErr := s.Generate(ctx, ids, gp, onEvent)
	if *asJSON {
		res := runResult{Tokens: st.Tokens, Text: st.Text, PromptTokens: st.PromptTokens, ReusedTokens: st.ReusedTokens,
			GenTokens: st.GenTokens, PrefillTokS: st.PrefillTokPerSec(), DecodeTokS: st.DecodeTokPerSec(), StopReason: st.StopReason}
		if res.Tokens == nil {
			res.Tokens = []int32{}
		}
		if err := writeJSON(env.Stdout, res); err != nil {
			return err
		}
	} else if st.GenTokens > 0 {
		fmt.Fprintln(env.Stdout)
		fmt.Fprintf(env.Stderr, "[%d prompt tokens at %.1f tok/s, %d generated at %.1f tok/s, stop: %s]\n",
			st.PrefillTokens, st.PrefillTokPerSec(), st.GenTokens, st.DecodeTokPerSec(), st.StopReason)
	}
	if genErr != nil && ctx.Err() == nil {
		if errors.Is(genErr, engine.ErrContextFull) && *keep == 0 {
			return fmt.Errorf("%w, or pass --keep N to keep the first N tokens and the most recent ones", genErr)
		}
		return genErr
	}
	return nil
}

func chatMessages(system string, msgs []chat.Message) []chat.Message {
	if system == "" {
		return msgs
	}
	return append([]chat.Message{{Role: "system", Content: system}}, msgs...)
}

// chatLoop reads user turns from stdin; the session's cache carries the
// conversation so each turn prefills only its new tokens. When the
// conversation outgrows the context, the oldest turns are dropped (the
// system message stays), as Ollama and LM Studio do.
func chatLoop(ctx context.Context, env *Env, s *engine.Session, system string, gp engine.GenParams) error {
	if env.Stdin == nil {
		return fmt.Errorf("%w: --chat without -p needs standard input", ErrUsage)
	}
	in := bufio.NewScanner(env.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	// Room kept for the reply when the turn's length is not capped.
	reserve := gp.MaxTokens
	if reserve <= 0 {
		reserve = min(512, s.Opts.Ctx/4)
	}
	var history []chat.Message
	for {
		fmt.Fprint(env.Stderr, "> ")
		if !in.Scan() {
			fmt.Fprintln(env.Stderr)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		history = append(history, chat.Message{Role: "user", Content: line})
		var ids []int32
		for {
			var err error
			if ids, err = s.M.EncodeChat(chatMessages(system, history)); err != nil {
				return err
			}
			if len(ids)+reserve <= s.Opts.Ctx || len(history) <= 1 {
				break
			}
			history = history[2:] // the oldest user turn and its reply
			fmt.Fprintln(env.Stderr, "[dropped the oldest turn to stay within the context]")
		}
		turnCtx, cancel := context.WithCancel(ctx)
		st, err := s.Generate(turnCtx, ids, gp, func(e engine.Event) error {
			_, err := io.WriteString(env.Stdout, e.Text)
			return err
		})
		cancel()
		fmt.Fprintln(env.Stdout)
		if err != nil {
			if errors.Is(err, engine.ErrContextFull) {
				return fmt.Errorf("%w: this message alone does not fit; raise --ctx", err)
			}
			return err
		}
		fmt.Fprintf(env.Stderr, "[reused %d, prefilled %d, generated %d at %.1f tok/s]\n",
			st.ReusedTokens, st.PrefillTokens, st.GenTokens, st.DecodeTokPerSec())
		history = append(history, chat.Message{Role: "assistant", Content: st.Text})
	}
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
