// Package atomicfile replaces files so that a crash or a power loss leaves
// either the old contents or the new ones, never a mix or a truncated file:
// the data goes to a temporary file in the same folder, which is flushed to
// the disk, renamed over the file, and then the folder is flushed so that
// the rename itself is on the disk.
package atomicfile

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxName is the file name limit of APFS and ext4, in bytes.
const maxName = 255

// randomDigits is the most os.CreateTemp adds for its "*".
const randomDigits = 10

// TempPrefix is how the temporary files of path's replacements are named,
// in path's folder: hidden, ".NAME.tmp-" and random digits (".tmp-" alone
// where the name is too long for that), so that a caller can recognize and
// remove the ones a crash left behind.
func TempPrefix(path string) string {
	prefix := "." + filepath.Base(path) + ".tmp-"
	if len(prefix)+randomDigits > maxName {
		return ".tmp-"
	}
	return prefix
}

// Write replaces path with what write writes, as a file of permissions
// perm (not subject to the umask). On an error path is unchanged and the
// temporary file removed.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix(path)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil { // F_FULLFSYNC on macOS
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	SyncDir(dir)
	return nil
}

// WriteFile replaces path with data, as Write does.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// SyncDir flushes a folder's entries, so that a rename or a new file in it
// survives a power loss. Best effort: the entry is in place either way, and
// some systems (Windows, some network file systems) refuse to sync a folder.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
