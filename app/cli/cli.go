// Package cli implements `nibble <subcommand>`. Each subcommand lives in its
// own file and registers itself in init, so commands stay independent.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
)

// Command is one subcommand. Name may have two words ("bench decode").
type Command struct {
	Name  string
	Usage string // one line: arguments after the name
	Run   func(env *Env, args []string) error
}

// Env carries the process streams so commands can be tested in-process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Interrupts delivers Ctrl-C; nil: the process's SIGINT (tests inject
	// their own).
	Interrupts <-chan os.Signal
}

// interrupts returns env's interrupt channel, or subscribes to SIGINT for
// the command's lifetime (stop unsubscribes).
func (env *Env) interrupts() (ch <-chan os.Signal, stop func()) {
	if env.Interrupts != nil {
		return env.Interrupts, func() {}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	return sig, func() { signal.Stop(sig) }
}

// interruptContext is a context that Ctrl-C cancels, for the long benches;
// stop cancels it and unsubscribes.
func (env *Env) interruptContext() (ctx context.Context, stop func()) {
	interrupts, stopSignals := env.interrupts()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-interrupts:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); stopSignals() }
}

var commands = map[string]*Command{}

// Register adds a subcommand; called from init functions.
func Register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: duplicate command " + c.Name)
	}
	commands[c.Name] = c
}

// ErrUsage marks an error caused by bad arguments (exit status 2).
var ErrUsage = errors.New("usage")

// Main runs the CLI with os.Args[1:] and returns the process exit status.
func Main(args []string) int {
	return Run(&Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, args)
}

// Run dispatches args to a command and reports its error on env.Stderr.
func Run(env *Env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(env.Stdout)
		return 0
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		fmt.Fprintf(env.Stderr, "nibble: unknown command %q (try `nibble help`)\n", strings.Join(args[:min(2, len(args))], " "))
		return 2
	}
	if err := cmd.Run(env, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(env.Stderr, "nibble %s: %v\n", cmd.Name, err)
		if errors.Is(err, ErrUsage) {
			fmt.Fprintf(env.Stderr, "usage: nibble %s %s\n", cmd.Name, cmd.Usage)
			return 2
		}
		return 1
	}
	return 0
}

func lookup(args []string) (*Command, []string) {
	if len(args) >= 2 {
		if c := commands[args[0]+" "+args[1]]; c != nil {
			return c, args[2:]
		}
	}
	return commands[args[0]], args[1:]
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "Nibble: a private LLM in your menu bar. Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  nibble %s %s\n", n, commands[n].Usage)
	}
}

// NewFlags returns a FlagSet that reports errors instead of exiting, and
// prints its usage to env.Stderr.
func NewFlags(env *Env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

// ParseFlags parses args allowing flags after positional arguments
// (`nibble tokenize -m M "text" --json`). It returns the positionals.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// intFlagAtLeast checks an integer flag's lower bound: nil when v >= lo, else a usage error
// (wrapping ErrUsage, exit status 2) that names the flag and the value given. flag is spelled
// as the command's usage line shows it, dashes included ("--threads", "-n"), so the message
// matches what the user typed.
func intFlagAtLeast(flag string, v, lo int) error {
	if v >= lo {
		return nil
	}
	switch lo {
	case 0:
		return fmt.Errorf("%w: %s must not be negative, got %d", ErrUsage, flag, v)
	case 1:
		return fmt.Errorf("%w: %s must be positive, got %d", ErrUsage, flag, v)
	}
	return fmt.Errorf("%w: %s must be at least %d, got %d", ErrUsage, flag, lo, v)
}

// intBound is one integer flag for checkIntFlags: its name as the usage line spells it, its
// value and the least value allowed.
type intBound struct {
	flag   string
	v, min int
}

// checkIntFlags applies intFlagAtLeast to each bound in turn and returns the first error.
func checkIntFlags(bounds ...intBound) error {
	for _, b := range bounds {
		if err := intFlagAtLeast(b.flag, b.v, b.min); err != nil {
			return err
		}
	}
	return nil
}

// checkKVGroup checks --kv-group: a quantized cache groups 32 or 64 elements
// under one scale and bias.
func checkKVGroup(g int) error {
	if g != 32 && g != 64 {
		return fmt.Errorf("%w: --kv-group must be 32 or 64", ErrUsage)
	}
	return nil
}
