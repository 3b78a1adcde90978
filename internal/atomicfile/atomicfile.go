// Package atomicfile replaces files so that a reader, or a process that
// starts after a crash, sees the old content or the new, never a part.
//
// The temporary file goes next to the target, not to os.TempDir: the
// rename then never crosses a mount, and an interrupted write is seen
// where it happened. The file is fsynced before the rename.
package atomicfile

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Write replaces path with data, with mode perm whatever the umask and
// whatever mode an earlier file had (renameio.WriteFile would keep that).
func Write(path string, data []byte, perm fs.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write for content that write streams.
func WriteFunc(path string, perm fs.FileMode, write func(io.Writer) error) error {
	f, err := renameio.NewPendingFile(path,
		renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(perm))
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	defer func() { _ = f.Cleanup() }() // a no-op once replaced
	if err := write(f); err != nil {
		return fmt.Errorf("write temporary file for %s: %w", path, err)
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}
