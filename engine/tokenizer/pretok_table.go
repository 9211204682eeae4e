package tokenizer

// Pre-tokenizer regexes per tokenizer.ggml.pre, as llama.cpp's
// llm_tokenizer_bpe constructor lists them. Each regex further splits the
// pieces the previous one produced. gpt2Regex, llama3Regex and qwen2Regex run
// through the hand-written splitters of pretok_custom.go (customSplitters); the
// rest run through regexp2 with llama.cpp's std::regex conventions
// (collapseRegex in pretok.go).
const (
	gpt2Regex   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	llama3Regex = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Regex  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

	deepseekCJK   = "[一-龥ࠀ-一가-퟿]+"
	deepseek3Main = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
	poroRegex     = " ?[^(\\s|.,!?…。，、।۔،)]+"
	gpt4oRegex    = `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

type preTokenizerSpec struct {
	regexes      []string
	ignoreMerges bool // a word that is already a token is not merged (llama3 family)
	addBOS       bool // llama.cpp's add_bos default when the key is absent
	noBOS        bool // no default BOS id (chatglm)
}

var (
	specDefault = preTokenizerSpec{regexes: []string{
		`[\p{P}\$\+<=>\^~\|]+`,
		gpt2Regex,
		`\p{N}+`,
		`[0-9][0-9][0-9]`,
	}}
	specLlama3        = preTokenizerSpec{regexes: []string{llama3Regex}, ignoreMerges: true, addBOS: true}
	specLlama3NoFlags = preTokenizerSpec{regexes: []string{llama3Regex}}
	specJais2         = preTokenizerSpec{regexes: []string{
		`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`,
	}}
	specDeepseekLLM = preTokenizerSpec{regexes: []string{
		"[\r\n]",
		"\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
		"\\s?[!-/:-~！-／：-～‘-‟　-。]+",
		"\\s+$",
		deepseekCJK,
		"\\p{N}+",
	}}
	specDeepseek3 = preTokenizerSpec{regexes: []string{
		`\p{N}{1,3}`,
		"[一-龥぀-ゟ゠-ヿ]+",
		deepseek3Main,
	}}
	specSpark25 = preTokenizerSpec{regexes: []string{
		`\p{N}{1,3}`,
		"[一-龥぀-ゟ゠-ヿ]+",
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
		`\p{N}`,
	}}
	specYoutu = preTokenizerSpec{regexes: []string{
		"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}, ignoreMerges: true}
	specDeepseekCoder = preTokenizerSpec{regexes: []string{
		"[\r\n]",
		`\s?\p{L}+`,
		`\s?\p{P}+`,
		deepseekCJK,
		`\p{N}`,
	}}
	specFalcon = preTokenizerSpec{regexes: []string{
		"[\\p{P}\\$\\+<=>\\^~\\|`]+",
		gpt2Regex,
		`[0-9][0-9][0-9]`,
	}}
	specStarcoder = preTokenizerSpec{regexes: []string{`\p{N}`, gpt2Regex}}
	specGPT2      = preTokenizerSpec{regexes: []string{gpt2Regex}}
	specQwen2     = preTokenizerSpec{regexes: []string{qwen2Regex}}
	specQwen35    = preTokenizerSpec{regexes: []string{
		`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}}
	specPoro     = preTokenizerSpec{regexes: []string{poroRegex}}
	specChatGLM4 = preTokenizerSpec{regexes: []string{llama3Regex}, noBOS: true}
	specViking   = preTokenizerSpec{regexes: []string{poroRegex, `\p{N}`}}
	specTekken   = preTokenizerSpec{regexes: []string{
		`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}, ignoreMerges: true, addBOS: true}
	specChameleon = preTokenizerSpec{regexes: []string{
		`<sentinel:[0-9]+>`,
		`(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`,
		`([\t\n]|    |  )`,
		`\p{N}`,
		"[\\p{P}!-/:-@\\[-`{-~]",
		gpt2Regex,
	}, addBOS: true}
	specGPT4o           = preTokenizerSpec{regexes: []string{gpt4oRegex}}
	specGraniteEmbMulti = preTokenizerSpec{regexes: []string{
		`[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}, ignoreMerges: true}
	specTinyAya = preTokenizerSpec{regexes: []string{
		`\d{1,3}(?=(?:\d{3})*\b)`,
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}}
	specSuperBPE   = preTokenizerSpec{regexes: []string{`\p{N}+`, `(?=(\d{3})+(?!\d))`}}
	specBailingMoe = preTokenizerSpec{regexes: []string{
		`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`,
	}}
	specSeedCoder = preTokenizerSpec{regexes: []string{
		`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}}
	specUfakzeka = preTokenizerSpec{regexes: []string{
		`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}}
	specLaguna    = preTokenizerSpec{regexes: []string{`[^\n]+|[\n]+`, qwen2Regex}}
	specExaoneMoe = preTokenizerSpec{regexes: []string{
		`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`,
	}}
	specMiniCPM5 = preTokenizerSpec{regexes: []string{
		`\p{N}{1,3}`,
		`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}, ignoreMerges: true}
)

// preTokenizers maps tokenizer.ggml.pre names to their splitting rules, as
// llama.cpp's vocabulary loader does. Pre-tokenizers that need more than
// regexes (kimi-k2, afmoe, gemma4, sarvam-moe, whitespace) are not supported.
var preTokenizers = map[string]preTokenizerSpec{
	"default": specDefault,

	// SentencePiece-style BPE (tokenizer model gemma4): spaces are ▁ already,
	// only runs of newlines are split from the rest; llama.cpp adds BOS.
	"gemma4": {regexes: []string{`[^\n]+|[\n]+`}, addBOS: true},

	"llama3": specLlama3, "llama-v3": specLlama3, "llama-bpe": specLlama3, "falcon3": specLlama3,
	"falcon-h1": specLlama3, "pixtral": specLlama3, "midm-2.0": specLlama3, "lfm2": specLlama3,
	"jina-v5-nano": specLlama3,
	"dbrx":         specLlama3NoFlags, "smaug-bpe": specLlama3NoFlags,
	"jais-2": specJais2,

	"deepseek-llm":   specDeepseekLLM,
	"deepseek-coder": specDeepseekCoder,
	"deepseek-v3":    specDeepseek3, "hunyuan-dense": specDeepseek3, "joyai-llm": specDeepseek3, "hy_v4": specDeepseek3,
	"spark2_5": specSpark25,
	"youtu":    specYoutu,
	"falcon":   specFalcon,

	"starcoder": specStarcoder, "refact": specStarcoder, "command-r": specStarcoder, "smollm": specStarcoder,
	"codeshell": specStarcoder, "exaone": specStarcoder, "minerva-7b": specStarcoder, "mellum2": specStarcoder,

	"gpt-2": specGPT2, "phi-2": specGPT2, "jina-es": specGPT2, "jina-de": specGPT2, "gigachat": specGPT2,
	"jina-v2-es": specGPT2, "jina-v2-de": specGPT2, "a.x-4.0": specGPT2, "mellum": specGPT2,
	"modern-bert": specGPT2, "jina-v1-en": specGPT2, "jina-v2-code": specGPT2, "roberta-bpe": specGPT2,
	"mpt": specGPT2, "olmo": specGPT2, "jais": specGPT2, "trillion": specGPT2, "granite-docling": specGPT2,
	"exaone4": specGPT2,

	"qwen2": specQwen2, "deepseek-r1-qwen": specQwen2, "kormo": specQwen2, "f2llmv2": specQwen2,
	"stablelm2": specQwen2, "hunyuan": specQwen2, "solar-open": specQwen2, "megrez": specQwen2,
	"qwen35": specQwen35,

	"poro-chat": specPoro, "bloom": specPoro, "gpt3-finnish": specPoro,
	"glm4": specChatGLM4, "chatglm-bpe": specChatGLM4,
	"viking":    specViking,
	"tekken":    specTekken,
	"chameleon": specChameleon,
	"gpt-4o":    specGPT4o, "llama4": specGPT4o, "kanana2": specGPT4o, "talkie": specGPT4o, "minimax-m2": specGPT4o,
	"granite-embed-multi-97m": specGraniteEmbMulti,
	"tiny_aya":                specTinyAya, "cohere2moe": specTinyAya,
	"superbpe":   specSuperBPE,
	"bailingmoe": specBailingMoe, "bailingmoe2": specBailingMoe, "llada-moe": specBailingMoe,
	"seed-coder": specSeedCoder,
	"ufakzeka":   specUfakzeka,
	"grok-2":     specQwen2,
	"laguna":     specLaguna,
	"exaone-moe": specExaoneMoe,
	"minicpm5":   specMiniCPM5,
}
