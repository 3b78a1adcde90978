package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/terway-sim/terway/daemon/store"
)

// storeView is what one daemon's store records.
type storeView struct {
	atts    []store.Attachment
	intents []store.Intent
}

// storeAttempts bounds how often a copy torn by a concurrent commit is
// taken again.
const storeAttempts = 5

// readStore reads a daemon's store without disturbing the daemon: the
// running daemon holds bbolt's exclusive flock on the file, so the store
// is copied (flock is advisory; reading is allowed) and the copy opened.
// A copy taken while a commit was being written can be torn: the file
// changed during the copy, or the copy does not open. Either is retried.
func readStore(ctx context.Context, path string) (*storeView, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	dir, err := os.MkdirTemp("", "audit")
	if err != nil {
		return nil, fmt.Errorf("store %s: temp dir for a copy: %w", path, err)
	}
	defer os.RemoveAll(dir)
	var last error
	for i := range storeAttempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("store %s: %w (last attempt: %w)", path, ctx.Err(), last)
			case <-time.After(time.Duration(i) * 20 * time.Millisecond):
			}
		}
		cp := filepath.Join(dir, fmt.Sprintf("copy%d.db", i))
		v, err := readStoreCopy(path, cp)
		if err == nil {
			return v, nil
		}
		last = err
	}
	return nil, fmt.Errorf("store %s: no consistent copy in %d attempts: %w", path, storeAttempts, last)
}

// errTorn marks a copy during which the file changed.
var errTorn = errors.New("the file changed while it was copied")

// readStoreCopy copies path to cp and reads the copy. A Terway-written
// store is imported into the copy, which leaves the original untouched.
func readStoreCopy(path, cp string) (v *storeView, err error) {
	if err := copyStable(path, cp); err != nil {
		return nil, err
	}
	// A torn copy can hold pages bbolt does not expect; it panics on some.
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("read copy: bbolt panicked (torn copy?): %v", r)
		}
	}()
	s, err := store.Open(cp, store.Options{Timeout: 200 * time.Millisecond, NoSync: true, ImportTerway: true})
	if err != nil {
		return nil, fmt.Errorf("open copy: %w", err)
	}
	defer s.Close()
	v = &storeView{}
	if v.atts, err = s.List(); err != nil {
		return nil, fmt.Errorf("list attachments: %w", err)
	}
	if v.intents, err = s.ListIntents(); err != nil {
		return nil, fmt.Errorf("list intents: %w", err)
	}
	return v, nil
}

// copyStable copies src to dst and fails with errTorn when src's size or
// modification time changed meanwhile.
func copyStable(src, dst string) error {
	before, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create copy: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close copy: %w", err)
	}
	after, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return errTorn
	}
	return nil
}
