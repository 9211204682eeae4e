package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"nibble/app/server"
	"nibble/engine/backend"
	"nibble/engine/estimate"
	"nibble/engine/scheduler"
)

func init() {
	Register(&Command{
		Name:  "serve",
		Usage: "-m MODEL [--addr 127.0.0.1:11435] [--token T] [--cors ORIGIN ...] [--slots N] [--queue N] [--max-body SIZE] [--any-model] [--ctx N] [--kv f16|q8|q4] [--backend cpu|metal|auto]",
		Run:   serveCmd,
	})
}

// shutdownGrace is how long Ctrl-C lets replies in progress finish.
const shutdownGrace = 10 * time.Second

// serveCmd runs the OpenAI-compatible local server (app/server) until
// Ctrl-C: the listener closes at once, replies in progress get
// shutdownGrace to finish (a second Ctrl-C stops them), then the engine
// shuts down.
func serveCmd(env *Env, args []string) error {
	fs := NewFlags(env, "serve")
	var mf modelFlags
	mf.register(fs)
	addr := fs.String("addr", "127.0.0.1:11435", "listen on `HOST:PORT` (a non-loopback address requires --token)")
	token := fs.String("token", "", "require `T` as a bearer token (Authorization: Bearer T); default $NIBBLE_TOKEN, which other local users cannot read from the process list")
	var cors multiFlag
	fs.Var(&cors, "cors", "let browser pages from `ORIGIN` call the API (repeatable or comma-separated, e.g. http://localhost:3000; * for any)")
	slots := fs.Int("slots", 2, "requests generated at once")
	queue := fs.Int("queue", 16, "requests that may wait for a slot before 429")
	maxBody := fs.String("max-body", "8MiB", "request body limit `SIZE`")
	anyModel := fs.Bool("any-model", false, "accept any model name for the loaded model (for clients with a fixed model name)")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos[0])
	}
	if err := checkIntFlags(intBound{"--slots", *slots, 1}, intBound{"--queue", *queue, 1}); err != nil {
		return err
	}
	bodyLimit, err := estimate.ParseSize(*maxBody)
	if err != nil || bodyLimit <= 0 {
		return fmt.Errorf("%w: --max-body %q: want a size such as 8MiB", ErrUsage, *maxBody)
	}
	if *token == "" {
		*token = os.Getenv("NIBBLE_TOKEN")
	}
	var origins []string
	for _, c := range cors {
		for o := range strings.SplitSeq(c, ",") {
			if o = strings.TrimSpace(o); o != "" {
				origins = append(origins, o)
			}
		}
	}
	// Refuse a bad configuration before loading anything.
	if err := server.CheckBind(*addr, *token); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if _, err := server.New(nil, server.Config{Addr: *addr, Token: *token, CORSOrigins: origins}); err != nil {
		return fmt.Errorf("%w: --cors: %v", ErrUsage, err)
	}
	if mf.path == "" {
		return fmt.Errorf("%w: -m MODEL is required", ErrUsage)
	}
	o, err := mf.options()
	if err != nil {
		return err
	}

	b, choice, err := mf.newBackend()
	if err != nil {
		return err
	}
	mf.warnFallback(env, choice)
	sched := scheduler.New(scheduler.Config{Slots: *slots, QueueLimit: *queue, Threads: mf.threads, NewBackend: func() backend.Backend { return b }})
	defer sched.Close()
	info, err := sched.Load(mf.path, o)
	if err != nil {
		return err
	}
	warnAboveTrained(env, info.Options.Ctx, info.CtxTrain)
	if info.TemplateProblem != "" {
		fmt.Fprintf(env.Stderr, "warning: %s\n", info.TemplateProblem)
	}
	l, err := server.Listen(sched, server.Config{Addr: *addr, Token: *token, CORSOrigins: origins,
		MaxBodyBytes: bodyLimit, AnyModel: *anyModel}, env.Stderr)
	if err != nil {
		return err
	}
	interrupts, stopSignals := env.interrupts()
	defer stopSignals()

	auth := "no token"
	if *token != "" {
		auth = "bearer token required"
	}
	fmt.Fprintf(env.Stdout, "nibble serve: listening on %s (model %s, %s, %s; Ctrl-C stops)\n", l.URL(), server.ModelID(info.Path), info.Options.KVLabel(), auth)

	select {
	case <-l.Done():
		return l.Err()
	case <-interrupts:
	}
	fmt.Fprintf(env.Stderr, "nibble serve: shutting down; replies in progress have %s to finish (Ctrl-C again stops them)\n", shutdownGrace)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	go func() {
		select {
		case <-interrupts:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := l.Shutdown(ctx); err != nil {
		return err
	}
	return sched.Close()
}
