package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofrs/flock"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// ErrDamaged: the file is a bbolt database (its meta pages are valid) but
// its pages are not: bbolt's consistency check fails, bbolt panics or
// faults reading it, or a record of our own buckets no longer decodes.
// Open refuses it; the error names the path and says how to recover
// (terwayd --rebuild-store, which moves the file aside with MoveAside and
// rebuilds the store from the node's truth).
var ErrDamaged = errors.New("store file is damaged")

// RebuildHint is what an error wrapping ErrDamaged tells the operator.
const RebuildHint = "run terwayd --rebuild-store to move it aside and rebuild the store from the node's ENIs, metadata and pods"

// maxCheckErrors is how many of bbolt's consistency errors an error names.
const maxCheckErrors = 3

// damaged wraps ErrDamaged with a one-line detail.
func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, oneLine(fmt.Sprintf(format, args...)))
}

// oneLine keeps a message (a panic value, bbolt's errors) on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// faultTolerant runs f with memory faults turned into panics (bbolt reads
// the file through mmap: a page pointer computed from garbage can point
// outside the mapping) and turns any panic into an error wrapping
// ErrDamaged. bbolt's View and Update roll their transaction back on a
// panic, so the DB stays usable (and closable) afterwards.
func faultTolerant(what string, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damaged("bbolt panicked while %s: %v", what, r)
		}
	}()
	return f()
}

// openBolt is bolt.Open, except that a panic inside it (bbolt loads the
// freelist at open and panics on a garbage freelist page) is an error
// wrapping ErrDamaged, and leaves neither the file descriptor nor bbolt's
// file lock behind. Only the mapping of a DB that panicked after mmap
// cannot be undone (bbolt does not hand it back); it holds no lock. The
// file bbolt opened is returned too, for closeBolt.
func openBolt(path string, o bolt.Options) (db *bolt.DB, file *os.File, err error) {
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				// The mapping would keep the open file (and its flock)
				// alive after Close: unlock explicitly.
				_ = unix.Flock(int(file.Fd()), unix.LOCK_UN)
				_ = file.Close()
			}
			db, file, err = nil, nil, damaged("bbolt panicked while opening it: %v", r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &o)
	return db, file, err
}

// closeBolt closes db after a failed Open; should bbolt panic there too,
// file (bbolt's, from openBolt) is unlocked and closed anyway.
func closeBolt(db *bolt.DB, file *os.File) {
	defer func() {
		if r := recover(); r != nil && file != nil {
			_ = unix.Flock(int(file.Fd()), unix.LOCK_UN)
			_ = file.Close()
		}
	}()
	_ = db.Close()
}

// verify reads every key and value of every bucket (in this goroutine,
// where a fault is recoverable) and then runs bbolt's consistency check
// (Tx.Check: page types, references, freelist, key order). Any finding is
// an error wrapping ErrDamaged. It does not write.
func (s *Store) verify() error {
	return faultTolerant("reading it", func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			var sum uint32
			if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				sum = walkBucket(b, crc32.Update(sum, crc32.IEEETable, name))
				return nil
			}); err != nil {
				return damaged("reading it: %v", err)
			}
			var errs []string
			n := 0
			for err := range tx.Check() {
				if n++; n <= maxCheckErrors {
					errs = append(errs, err.Error())
				}
			}
			if n == 0 {
				return nil
			}
			if n > maxCheckErrors {
				errs = append(errs, fmt.Sprintf("and %d more", n-maxCheckErrors))
			}
			return damaged("bbolt's consistency check failed: %s", strings.Join(errs, "; "))
		})
	})
}

// walkBucket touches every key and value of b and its nested buckets, so
// that a page that cannot be read faults here rather than in the
// consistency check's own goroutine.
func walkBucket(b *bolt.Bucket, sum uint32) uint32 {
	_ = b.ForEach(func(k, v []byte) error {
		sum = crc32.Update(sum, crc32.IEEETable, k)
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				sum = walkBucket(nb, sum)
			}
			return nil
		}
		sum = crc32.Update(sum, crc32.IEEETable, v)
		return nil
	})
	return sum
}

// DamagedSuffix starts the name MoveAside gives a refused file:
// "<path>.damaged-<UTC time>".
const DamagedSuffix = ".damaged-"

// MoveAside renames the store file at path to
// "<path>.damaged-<UTC time, 20060102T150405Z>" (with "-1", "-2", ... if
// that name is taken), mode 0600, and returns the new path. It holds the
// file's bbolt lock while doing so, so it fails with ErrLocked instead of
// moving a file another process has open as a store. It is the first half
// of terwayd --rebuild-store: the caller then opens a new store at path.
func MoveAside(path string, now time.Time, lockTimeout time.Duration) (string, error) {
	if lockTimeout <= 0 {
		lockTimeout = DefaultTimeout
	}
	// O_RDWR without O_CREATE: an absent store is an error, not created.
	l := flock.New(path, flock.SetFlag(os.O_RDWR))
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	ok, err := l.TryLockContext(ctx, 50*time.Millisecond)
	switch {
	case ok:
		defer l.Unlock()
	case err == nil || errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("move store %s aside: %w (is another terwayd running?)", path, ErrLocked)
	default:
		return "", fmt.Errorf("move store %s aside: %w", path, err)
	}
	base := path + DamagedSuffix + now.UTC().Format("20060102T150405Z")
	to := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
			break
		} else if err != nil {
			return "", fmt.Errorf("move store %s aside: %w", path, err)
		}
		to = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return "", fmt.Errorf("move store %s aside: chmod 0600: %w", path, err)
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("move store %s aside: %w", path, err)
	}
	return to, nil
}
