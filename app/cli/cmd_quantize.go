package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"nibble/engine/chat"
	"nibble/engine/ggml"
	"nibble/engine/requant"
)

func init() {
	Register(&Command{
		Name:  "quantize",
		Usage: "-m IN.gguf -o OUT.gguf --type f16|q8_0|q4_0|bf16|f32 [--embed-type T] [--chat-template FILE.jinja] [--override KEY=TYPE:VALUE]...",
		Run:   quantizeCmd,
	})
}

const quantizeHelp = `nibble quantize: rewrite a model with its weights in another type.

Every 2D weight is expanded to float32 and encoded again in --type (as
llama-quantize's reference encoders do); norms, routers and other 1D tensors
stay as they are (F32), and the metadata is copied. --type mxfp4 is
llama-quantize's MXFP4_MOE: the experts' weights MXFP4, the others Q8_0. --embed-type keeps the token
embedding (and an untied output matrix) at another type, e.g. q8_0 under a
q4_0 model. --chat-template writes a Jinja chat template into the metadata
(tokenizer.chat_template), checked to parse first. --override sets other
metadata, as llama.cpp's --override-kv writes it: e.g.
tokenizer.ggml.eot_token_id=u32:13 makes a newline end the model's turn.

Flags:
`

func quantizeCmd(env *Env, args []string) error {
	fs := NewFlags(env, "quantize")
	in := fs.String("m", "", "input model `FILE.gguf`")
	out := fs.String("o", "", "output `FILE.gguf` (written atomically)")
	typ := fs.String("type", "", "type of the weights: "+typeNames())
	embedType := fs.String("embed-type", "", "type of token_embd (and an untied output); default: --type")
	templatePath := fs.String("chat-template", "", "Jinja chat template `FILE.jinja` to write as tokenizer.chat_template")
	var overrides stringList
	fs.Var(&overrides, "override", "metadata to set, `KEY=TYPE:VALUE` with TYPE u32, i32, f32, bool or str (repeatable)")
	fs.Usage = func() { io.WriteString(fs.Output(), quantizeHelp); fs.PrintDefaults() }
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos[0])
	}
	if *in == "" || *out == "" || *typ == "" {
		return fmt.Errorf("%w: need -m IN.gguf, -o OUT.gguf and --type", ErrUsage)
	}
	o := requant.Options{Set: map[string]any{}}
	for _, kv := range overrides {
		key, val, err := parseOverride(kv)
		if err != nil {
			return fmt.Errorf("%w: --override %q: %v", ErrUsage, kv, err)
		}
		o.Set[key] = val
	}
	if o.Type, err = requant.ParseType(*typ); err != nil {
		return fmt.Errorf("%w: --type: %v", ErrUsage, err)
	}
	if *embedType != "" {
		if o.EmbedType, err = requant.ParseType(*embedType); err != nil {
			return fmt.Errorf("%w: --embed-type: %v", ErrUsage, err)
		}
		o.EmbedTypeSet = true
	}
	if *templatePath != "" {
		src, err := os.ReadFile(*templatePath)
		if err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		if _, err := chat.Parse(string(src)); err != nil {
			return fmt.Errorf("--chat-template %s: %w", *templatePath, err)
		}
		o.Set["tokenizer.chat_template"] = string(src)
	}
	start := time.Now()
	sum, err := requant.File(*in, *out, o)
	if err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	types := make([]ggml.Type, 0, len(sum.ByType))
	for t := range sum.ByType {
		types = append(types, t)
	}
	slices.Sort(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%d %s", sum.ByType[t], t)
	}
	fmt.Fprintf(env.Stdout, "%s: %d bytes (%.1f MiB), %d tensors (%s) in %.1fs\n", *out, st.Size(),
		float64(st.Size())/(1<<20), sum.Tensors, strings.Join(parts, ", "), time.Since(start).Seconds())
	if len(sum.Kept) > 0 {
		fmt.Fprintf(env.Stdout, "kept in their own type (rows not a multiple of the block): %s\n", strings.Join(sum.Kept, ", "))
	}
	return nil
}

func typeNames() string {
	names := make([]string, len(requant.Types))
	for i, t := range requant.Types {
		names[i] = strings.ToLower(t.String())
	}
	return strings.Join(names, ", ")
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// parseOverride reads KEY=TYPE:VALUE into a key and a Go value of the
// width GGUF readers expect.
func parseOverride(s string) (string, any, error) {
	key, typed, ok := strings.Cut(s, "=")
	typ, val, ok2 := strings.Cut(typed, ":")
	if !ok || !ok2 || key == "" {
		return "", nil, errors.New("want KEY=TYPE:VALUE")
	}
	switch typ {
	case "u32":
		n, err := strconv.ParseUint(val, 10, 32)
		return key, uint32(n), err
	case "i32":
		n, err := strconv.ParseInt(val, 10, 32)
		return key, int32(n), err
	case "f32":
		f, err := strconv.ParseFloat(val, 32)
		return key, float32(f), err
	case "bool":
		b, err := strconv.ParseBool(val)
		return key, b, err
	case "str":
		return key, val, nil
	}
	return "", nil, fmt.Errorf("type %q: want u32, i32, f32, bool or str", typ)
}
