package extract

import (
	"archive/zip"
	"bytes"
	"fmt"
	"path"
	"strings"

	"nibble/app/documents"
)

// codeLanguages maps a lower-case extension (with its dot) to the language
// name recorded for source code.
var codeLanguages = map[string]string{
	".go": "go", ".py": "python", ".pyw": "python", ".pyi": "python",
	".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
	".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
	".rs": "rust", ".c": "c", ".h": "c",
	".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
	".m": "objective-c", ".mm": "objective-cpp",
	".java": "java", ".swift": "swift", ".kt": "kotlin", ".kts": "kotlin",
	".rb": "ruby", ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".fish": "fish",
	".sql": "sql", ".cs": "csharp", ".fs": "fsharp", ".php": "php", ".pl": "perl", ".pm": "perl",
	".lua": "lua", ".r": "r", ".scala": "scala", ".dart": "dart", ".ex": "elixir", ".exs": "elixir",
	".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".clj": "clojure", ".jl": "julia",
	".zig": "zig", ".nim": "nim", ".vue": "vue", ".svelte": "svelte",
	".css": "css", ".scss": "scss", ".less": "less",
	".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".ini": "ini", ".cfg": "ini",
	".xml": "xml", ".proto": "protobuf", ".graphql": "graphql", ".gql": "graphql",
	".tf": "terraform", ".ps1": "powershell", ".bat": "batch", ".cmd": "batch",
	".vim": "vim", ".el": "elisp", ".s": "assembly", ".asm": "assembly",
	".f90": "fortran", ".tex": "latex", ".cmake": "cmake", ".gradle": "gradle",
	".mk": "makefile",
}

// codeFileNames are extensionless file names that are source code.
var codeFileNames = map[string]string{
	"makefile": "makefile", "gnumakefile": "makefile", "dockerfile": "dockerfile",
	"containerfile": "dockerfile", "cmakelists.txt": "cmake", "rakefile": "ruby",
	"gemfile": "ruby", "justfile": "just", "vagrantfile": "ruby",
}

var textExts = map[string]documents.Kind{
	".txt": documents.KindText, ".text": documents.KindText, ".log": documents.KindText, ".rst": documents.KindText, ".org": documents.KindText,
	".md": documents.KindMarkdown, ".markdown": documents.KindMarkdown, ".mdx": documents.KindMarkdown, ".mdown": documents.KindMarkdown,
	".csv": documents.KindCSV, ".tsv": documents.KindCSV,
	".json": documents.KindJSON, ".jsonl": documents.KindJSON, ".ndjson": documents.KindJSON, ".geojson": documents.KindJSON,
	".html": documents.KindHTML, ".htm": documents.KindHTML, ".xhtml": documents.KindHTML,
}

// magic recognizes formats by their first bytes. Formats Nibble reads
// (PDF, zip-based DOCX) are handled before this table.
var magic = []struct {
	prefix string
	offset int
	what   string
}{
	{"\x89PNG\r\n\x1a\n", 0, "a PNG image"},
	{"\xff\xd8\xff", 0, "a JPEG image"},
	{"GIF87a", 0, "a GIF image"},
	{"GIF89a", 0, "a GIF image"},
	{"II*\x00", 0, "a TIFF image"},
	{"MM\x00*", 0, "a TIFF image"},
	{"8BPS", 0, "a Photoshop image"},
	{"ftypheic", 4, "a HEIC image"},
	{"ftypmif1", 4, "a HEIF image"},
	{"ftypavif", 4, "an AVIF image"},
	{"ftyp", 4, "a video or audio file (MP4/MOV)"},
	{"RIFF", 0, "a RIFF media file (WAV/AVI/WebP)"},
	{"OggS", 0, "an Ogg audio file"},
	{"fLaC", 0, "a FLAC audio file"},
	{"ID3", 0, "an MP3 audio file"},
	{"\x1f\x8b", 0, "a gzip archive"},
	{"BZh", 0, "a bzip2 archive"},
	{"\xfd7zXZ\x00", 0, "an xz archive"},
	{"(\xb5/\xfd", 0, "a zstd archive"},
	{"7z\xbc\xaf\x27\x1c", 0, "a 7-Zip archive"},
	{"Rar!\x1a\x07", 0, "a RAR archive"},
	{"\x7fELF", 0, "an ELF executable"},
	{"\xcf\xfa\xed\xfe", 0, "a Mach-O executable"},
	{"\xce\xfa\xed\xfe", 0, "a Mach-O executable"},
	{"\xca\xfe\xba\xbe", 0, "a Mach-O universal binary or Java class"},
	{"MZ", 0, "a Windows executable"},
	{"\x00asm", 0, "a WebAssembly module"},
	{"SQLite format 3\x00", 0, "an SQLite database"},
	{"GGUF", 0, "a GGUF model file"},
	{"bplist00", 0, "a binary property list"},
	{"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 0, "a legacy or password-protected Microsoft Office file (OLE); save it as .docx without a password"},
	{"{\\rtf", 0, "an RTF document; save it as .docx or plain text"},
	{"%!PS", 0, "a PostScript file"},
	{"wOFF", 0, "a web font"},
	{"wOF2", 0, "a web font"},
}

// detect decides how to read a file from its name and content.
func detect(name string, data []byte) (documents.Kind, string, error) {
	base := strings.ToLower(path.Base(strings.ReplaceAll(name, "\\", "/")))
	ext := path.Ext(base)

	// Formats with an unmistakable signature win over the extension.
	head := data
	if len(head) > 1024 {
		head = head[:1024]
	}
	if bytes.HasPrefix(data, []byte("%PDF-")) || (ext == ".pdf" && bytes.Contains(head, []byte("%PDF-"))) {
		return documents.KindPDF, "", nil
	}
	if bytes.HasPrefix(data, []byte("PK\x03\x04")) || bytes.HasPrefix(data, []byte("PK\x05\x06")) {
		return detectZip(ext, data)
	}
	if ext == ".pdf" {
		return "", "", fmt.Errorf("%w: named .pdf but it is not a PDF (no %%PDF header)%s", documents.ErrDamaged, whatIs(data))
	}
	switch ext {
	case ".docx", ".docm", ".dotx":
		return "", "", fmt.Errorf("%w: named %s but it is not a zip archive as a .docx must be%s", documents.ErrDamaged, ext, whatIs(data))
	case ".doc":
		return "", "", fmt.Errorf("%w: legacy Word .doc files are not supported; save it as .docx", documents.ErrUnsupported)
	case ".xlsx", ".xls", ".numbers", ".pptx", ".ppt", ".key", ".pages", ".odt", ".epub":
		return "", "", fmt.Errorf("%w: %s files are not supported yet", documents.ErrUnsupported, ext)
	}
	for _, m := range magic {
		if len(data) >= m.offset+len(m.prefix) && string(data[m.offset:m.offset+len(m.prefix)]) == m.prefix {
			if m.prefix == "MZ" && !looksBinary(data) {
				continue // "MZ" is also how a text file may start
			}
			return "", "", fmt.Errorf("%w: this is %s, not a text document", binaryOrUnsupported(m.what), m.what)
		}
	}
	if lang, ok := codeLanguages[ext]; ok {
		return documents.KindCode, lang, nil
	}
	if lang, ok := codeFileNames[base]; ok {
		return documents.KindCode, lang, nil
	}
	if k, ok := textExts[ext]; ok {
		return k, "", nil
	}
	if looksHTML(head) {
		return documents.KindHTML, "", nil
	}
	return documents.KindText, "", nil
}

func binaryOrUnsupported(what string) error {
	if strings.Contains(what, "Office") || strings.Contains(what, "RTF") || strings.Contains(what, "PostScript") {
		return documents.ErrUnsupported
	}
	return documents.ErrBinary
}

func whatIs(data []byte) string {
	for _, m := range magic {
		if len(data) >= m.offset+len(m.prefix) && string(data[m.offset:m.offset+len(m.prefix)]) == m.prefix {
			return "; it looks like " + m.what
		}
	}
	return ""
}

// looksBinary reports whether the first 8 KiB hold a NUL byte.
func looksBinary(data []byte) bool {
	if len(data) > 8192 {
		data = data[:8192]
	}
	return bytes.IndexByte(data, 0) >= 0
}

func looksHTML(head []byte) bool {
	s := strings.ToLower(strings.TrimLeft(string(head), " \t\r\n\ufeff"))
	return strings.HasPrefix(s, "<!doctype html") || strings.HasPrefix(s, "<html") ||
		(strings.HasPrefix(s, "<?xml") && strings.Contains(s, "<html"))
}

// detectZip tells a .docx from other zip-based files.
func detectZip(ext string, data []byte) (documents.Kind, string, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if ext == ".docx" || ext == ".docm" || ext == ".dotx" {
			return "", "", fmt.Errorf("%w: the .docx (a zip archive) cannot be opened: %v", documents.ErrDamaged, err)
		}
		return "", "", fmt.Errorf("%w: this is a zip archive, not a text document", documents.ErrUnsupported)
	}
	has := func(name string) bool {
		for _, f := range zr.File {
			if f.Name == name {
				return true
			}
		}
		return false
	}
	switch {
	case has("word/document.xml") || has("word/document2.xml") || (ext == ".docx" || ext == ".docm" || ext == ".dotx"):
		return documents.KindDOCX, "", nil
	case has("xl/workbook.xml"):
		return "", "", fmt.Errorf("%w: Excel spreadsheets (.xlsx) are not supported yet; export the sheet as CSV", documents.ErrUnsupported)
	case has("ppt/presentation.xml"):
		return "", "", fmt.Errorf("%w: PowerPoint presentations (.pptx) are not supported yet; export as PDF", documents.ErrUnsupported)
	case has("mimetype"):
		return "", "", fmt.Errorf("%w: OpenDocument/EPUB files are not supported yet", documents.ErrUnsupported)
	}
	return "", "", fmt.Errorf("%w: this is a zip archive, not a text document", documents.ErrUnsupported)
}
