package download

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"nibble/internal/atomicfile"
)

// sidecar is NAME.part.json: what identifies the bytes in NAME.part, so a
// resume continues only the same file.
type sidecar struct {
	Version      int    `json:"version"`
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	Size         int64  `json:"size,omitempty"` // the server's size; 0 = not known yet
	// The caller's Expect, so a Resume checks what the first Start asked.
	ExpectSize int64  `json:"expect_size,omitempty"`
	SHA256     string `json:"sha256,omitempty"`
}

const sidecarVersion = 1

// ifRange is the validator for an If-Range header: a strong ETag, else the
// Last-Modified date (RFC 9110 forbids weak ETags there).
func (s *sidecar) ifRange() string {
	if s.ETag != "" && !strings.HasPrefix(s.ETag, "W/") {
		return s.ETag
	}
	return s.LastModified
}

func readSidecar(path string) (*sidecar, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s sidecar
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Version != sidecarVersion || s.URL == "" || s.Size < 0 || s.ExpectSize < 0 {
		return nil, fmt.Errorf("%s: not a download record this version understands", path)
	}
	if s.SHA256 != "" {
		if b, err := hex.DecodeString(s.SHA256); err != nil || len(b) != 32 {
			return nil, fmt.Errorf("%s: bad sha256 %q", path, s.SHA256)
		}
	}
	return &s, nil
}

// writeSidecar replaces path atomically, fsync'd, so after a crash the
// sidecar is either the old record or the new one, never half of each.
func writeSidecar(path string, s *sidecar) error {
	s.Version = sidecarVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// PartialFile is a resumable download, for the UI's list.
type PartialFile struct {
	Name     string // the final file name, e.g. Model-Q4_K_M.gguf
	URL      string
	Done     int64 // bytes already downloaded
	Size     int64 // total bytes; 0 when the server has not said yet
	SHA256   string
	Modified time.Time // when the part was last written
}

// Partial lists the resumable downloads in destDir, by name. Parts without
// a readable sidecar are left out: their origin is unknown, so they cannot
// be resumed. A missing folder has none.
func Partial(destDir string) ([]PartialFile, error) {
	ents, err := os.ReadDir(destDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("download: list partial downloads: %w", err)
	}
	var out []PartialFile
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), partSuffix)
		if !ok || !e.Type().IsRegular() || checkName(name) != nil {
			continue
		}
		final := filepath.Join(destDir, name)
		meta, err := readSidecar(final + metaSuffix)
		if err != nil {
			continue
		}
		st, err := e.Info()
		if err != nil {
			continue // removed meanwhile (finished or discarded)
		}
		out = append(out, PartialFile{Name: name, URL: meta.URL, Done: st.Size(), Size: max(meta.Size, meta.ExpectSize),
			SHA256: meta.SHA256, Modified: st.ModTime()})
	}
	return out, nil // ReadDir sorts by name
}
