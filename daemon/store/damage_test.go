package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// fixture is a store file with 30 attachments (several data pages) and
// where its pages are.
type fixture struct {
	path     string
	data     []byte
	atts     []Attachment
	root     int // the attachments bucket's root page (a branch page)
	leaf     int // a leaf page of it
	freelist int
	pageSize int
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "terway")
	f := fixture{path: filepath.Join(dir, "ResRelation.db"), pageSize: os.Getpagesize()}
	s, err := Open(f.path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := s.Put(sampleAttachment("ns", fmt.Sprintf("pod-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if f.atts, err = s.List(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(f.path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		f.root = int(tx.Bucket([]byte(bucketAttachments)).Root())
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				break
			}
			switch {
			case p.Type == "freelist":
				f.freelist = id
			case p.Type == "leaf" && f.leaf == 0:
				f.leaf = id
			}
		}
		if p, err := tx.Page(f.root); err != nil || p.Type != "branch" {
			t.Fatalf("attachments root page %d: %+v %v, want a branch page", f.root, p, err)
		}
		return nil
	})
	_ = db.Close()
	if f.freelist == 0 || f.leaf == 0 {
		t.Fatalf("no freelist or leaf page found: %+v", f)
	}
	if f.data, err = os.ReadFile(f.path); err != nil {
		t.Fatal(err)
	}
	return f
}

// garbage is 1 KB of deterministic junk.
func garbage() []byte {
	b := make([]byte, 1024)
	for i := range b {
		b[i] = byte(i*7 + 13)
	}
	return b
}

// damage writes b at page, offset off, of a copy of the fixture's file
// (the fixture's own path when name is "") and returns the copy's path.
func (f fixture) damage(t *testing.T, name string, page, off int, b []byte) string {
	t.Helper()
	data := bytes.Clone(f.data)
	copy(data[page*f.pageSize+off:], b)
	path := f.path
	if name != "" {
		path = filepath.Join(filepath.Dir(f.path), name)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// openDamaged opens path, which must be refused as damaged without a
// panic, leaving the file as it was, unlocked, and no descriptor behind.
func openDamaged(t *testing.T, path string) error {
	t.Helper()
	before, _ := os.ReadFile(path)
	fds := openFDs(t)
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Open panicked: %v", r)
			}
		}()
		var s *Store
		s, err = Open(path, Options{NoSync: true, Timeout: 200 * time.Millisecond})
		if err == nil {
			_ = s.Close()
			t.Fatal("Open accepted a damaged file")
		}
	}()
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("err = %v, want ErrDamaged", err)
	}
	msg := err.Error()
	for _, want := range []string{path, "--rebuild-store", "damaged"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a refused file was modified")
	}
	if n := openFDs(t); n > fds {
		t.Errorf("%d file descriptors left open by the refused Open", n-fds)
	}
	f, ferr := os.Open(path)
	if ferr != nil {
		t.Fatal(ferr)
	}
	defer f.Close()
	if ferr := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); ferr != nil {
		t.Errorf("the refused file is still locked: %v", ferr)
	}
	return err
}

// 1 KB of garbage at the start of a data page used to make bbolt panic
// in Open ("assertion failed: Page expected to be ..."): a crash loop.
func TestDamagedDataPageIsRefused(t *testing.T) {
	f := newFixture(t)
	for _, page := range []int{f.root, f.leaf} {
		t.Run(fmt.Sprint("page", page), func(t *testing.T) {
			path := f.damage(t, fmt.Sprintf("page%d.db", page), page, 0, garbage())
			t.Logf("%v", openDamaged(t, path))
		})
	}
}

// A garbage freelist page made bbolt panic inside bolt.Open, with the file
// open and locked.
func TestDamagedFreelistIsRefused(t *testing.T) {
	f := newFixture(t)
	path := f.damage(t, "", f.freelist, 0, garbage())
	t.Logf("%v", openDamaged(t, path))
	// The lock is free: once moved aside, a new store opens at the path.
	if _, err := MoveAside(path, t0, time.Second); err != nil {
		t.Fatal(err)
	}
	openT(t, path, Options{NoSync: true})
}

// A branch element naming a page far beyond the file made bbolt read
// unmapped memory: a fatal fault, not even a panic.
func TestPageOutsideTheFileIsRefused(t *testing.T) {
	f := newFixture(t)
	pgid := make([]byte, 8)
	binary.LittleEndian.PutUint64(pgid, 1<<30)
	// page header (16 bytes), then branch elements {pos, ksize uint32; pgid uint64}.
	path := f.damage(t, "", f.root, 16+8, pgid)
	t.Logf("%v", openDamaged(t, path))
}

// Garbage anywhere past the meta pages: Open never panics, and either
// refuses the file as damaged or reads every record intact.
func TestGarbageAnywhere(t *testing.T) {
	f := newFixture(t)
	pages := len(f.data) / f.pageSize
	refused := 0
	for page := 2; page < pages; page++ {
		for _, off := range []int{0, 512, f.pageSize - 1024} {
			path := f.damage(t, "x.db", page, off, garbage())
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("page %d offset %d: Open panicked: %v", page, off, r)
					}
				}()
				s, err := Open(path, Options{NoSync: true, Timeout: 200 * time.Millisecond})
				if err != nil {
					if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "--rebuild-store") {
						t.Errorf("page %d offset %d: err = %v, want ErrDamaged", page, off, err)
					}
					refused++
					return
				}
				defer s.Close()
				if got, err := s.List(); err != nil || !reflect.DeepEqual(got, f.atts) {
					t.Errorf("page %d offset %d: accepted, but read %d records (%v)", page, off, len(got), err)
				}
			}()
		}
	}
	t.Logf("%d pages, %d damaged copies refused", pages, refused)
	if refused == 0 {
		t.Error("no damaged copy was refused")
	}
}

func TestSchema1IsMigrated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "terway")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ResRelation.db")
	a := sampleAttachment("ns", "a")
	key, data, _, err := encode(a)
	if err != nil {
		t.Fatal(err)
	}
	// What a schema-1 daemon wrote.
	writeBolt(t, path, map[string]map[string]string{
		"meta":        {"schema": "1", "writer": "terway-sim"},
		"attachments": {key: string(data)},
		"pods":        {},
		"intents":     {},
	})
	s := openT(t, path, Options{NoSync: true})
	if got := s.Instance(); got != "" {
		t.Errorf("Instance() of a schema-1 file = %q, want unknown", got)
	}
	if got, err := s.Get("ns", "a"); err != nil || !reflect.DeepEqual(got, a) {
		t.Errorf("record after migration: %+v %v", got, err)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "schema 1 to 2") {
		t.Errorf("warnings = %q, want one about the migration", w)
	}
	if err := s.SetInstance("i-migrated"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if meta := readBucket(t, path, "meta"); meta["schema"] != "2" || meta["instance"] != "i-migrated" {
		t.Errorf("meta after migration = %v", meta)
	}
	s = openT(t, path, Options{NoSync: true})
	if w := s.Warnings(); len(w) != 0 || s.Instance() != "i-migrated" {
		t.Errorf("reopened: warnings %q, instance %q", w, s.Instance())
	}
}

func TestInstanceRoundTrip(t *testing.T) {
	s, path := newStore(t)
	if got := s.Instance(); got != "" {
		t.Errorf("Instance() of a new store = %q", got)
	}
	if meta := readBucketLocked(t, s); meta["schema"] != "2" {
		t.Errorf("new store meta = %v", meta)
	}
	if err := s.SetInstance("i-bp1abc"); err != nil {
		t.Fatal(err)
	}
	if got := s.Instance(); got != "i-bp1abc" {
		t.Errorf("Instance() = %q", got)
	}
	_ = s.Close()
	if err := s.SetInstance("i-other"); !errors.Is(err, ErrClosed) {
		t.Errorf("SetInstance after Close: %v", err)
	}
	s = openT(t, path, Options{NoSync: true})
	if got := s.Instance(); got != "i-bp1abc" {
		t.Errorf("Instance() after reopen = %q", got)
	}
	if err := s.SetInstance(""); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if s = openT(t, path, Options{NoSync: true}); s.Instance() != "" {
		t.Errorf("Instance() after forgetting it = %q", s.Instance())
	}
}

// readBucketLocked reads meta through s's own DB (bbolt's lock is held).
func readBucketLocked(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).ForEach(func(k, v []byte) error { out[string(k)] = string(v); return nil })
	})
	return out
}

func TestExistingDirectoryMadePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "terway") // only ever a directory of this test
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ResRelation.db")
	s := openT(t, path, Options{NoSync: true})
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("store directory left at %#o", fi.Mode().Perm())
	}
	w := s.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], dir) || !strings.Contains(w[0], "0777") || !strings.Contains(w[0], "0700") {
		t.Errorf("warnings = %q, want one naming the directory, 0777 and 0700", w)
	}
	_ = s.Close()
	if s = openT(t, path, Options{NoSync: true}); len(s.Warnings()) != 0 {
		t.Errorf("warnings on reopen: %q", s.Warnings())
	}

	// A shared (sticky) directory is not changed, only reported.
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, filepath.Join(shared, "store.db"), Options{NoSync: true})
	fi, _ = os.Stat(shared)
	if fi.Mode()&(os.ModePerm|os.ModeSticky) != 0o777|os.ModeSticky {
		t.Errorf("shared directory changed to %v", fi.Mode())
	}
	if w := s2.Warnings(); len(w) != 1 || !strings.Contains(w[0], "shared directory") {
		t.Errorf("warnings = %q, want one about the shared directory", w)
	}
}

func TestMoveAside(t *testing.T) {
	f := newFixture(t)
	path := f.damage(t, "", f.root, 0, garbage())
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	// Held by another store: refused, nothing moved.
	other := filepath.Join(filepath.Dir(path), "held.db")
	s := openT(t, other, Options{NoSync: true})
	if _, err := MoveAside(other, t0, 100*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Errorf("MoveAside of a held store: %v, want ErrLocked", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("held store moved: %v", err)
	}
	_ = s.Close()

	to, err := MoveAside(path, t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := path + ".damaged-20260304T050607Z"; to != want {
		t.Errorf("moved to %s, want %s", to, want)
	}
	fi, err := os.Stat(to)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("moved file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(to); !bytes.Equal(b[f.root*f.pageSize:f.root*f.pageSize+1024], garbage()) {
		t.Error("moved file is not the damaged one")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store still at %s: %v", path, err)
	}
	// The same second again: a new name, nothing overwritten.
	f.damage(t, "", f.root, 0, garbage())
	to2, err := MoveAside(path, t0, time.Second)
	if err != nil || to2 != to+"-1" {
		t.Errorf("second MoveAside: %s %v, want %s-1", to2, err, to)
	}
	if _, err := MoveAside(path, t0, time.Second); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("MoveAside of an absent file: %v", err)
	}
}

// A panic of the caller's function is not taken for damage: it reaches
// the caller, the transaction is rolled back and the store stays usable.
func TestUpdatePanicPropagates(t *testing.T) {
	s, _ := newStore(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the caller's panic", r)
			}
		}()
		_ = s.Update(func(tx *Tx) error {
			if err := tx.Put(sampleAttachment("ns", "a")); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if _, err := s.Get("ns", "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a panicked Update was applied: %v", err)
	}
	if err := s.Put(sampleAttachment("ns", "b")); err != nil {
		t.Errorf("store unusable after a caller's panic: %v", err)
	}
}

// A freelist naming a live page panics nowhere: bbolt would hand the page
// out again and overwrite records. Only the consistency check sees it.
func TestFreelistNamingALivePageIsRefused(t *testing.T) {
	f := newFixture(t)
	b := make([]byte, 14)
	binary.LittleEndian.PutUint16(b[0:], 1) // count, at offset 10 of the page header
	binary.LittleEndian.PutUint64(b[6:], uint64(f.leaf))
	path := f.damage(t, "", f.freelist, 10, b)
	err := openDamaged(t, path)
	if !strings.Contains(err.Error(), "consistency check") || !strings.Contains(err.Error(), fmt.Sprintf("page %d", f.leaf)) {
		t.Errorf("err = %v, want bbolt's consistency check naming page %d", err, f.leaf)
	}
}

// The instance type's description is a cache beside the records: absent
// in a new store, kept across a reopen, refused once closed.
func TestInstanceTypeInfoRoundTrip(t *testing.T) {
	s, path := newStore(t)
	if got, err := s.InstanceTypeInfo(); err != nil || got != nil {
		t.Fatalf("InstanceTypeInfo() of a new store = %q, %v", got, err)
	}
	info := []byte(`{"InstanceTypeId":"ecs.g7.xlarge","EniQuantity":4}`)
	if err := s.SetInstanceTypeInfo(info); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := s.SetInstanceTypeInfo(info); !errors.Is(err, ErrClosed) {
		t.Errorf("SetInstanceTypeInfo after Close: %v", err)
	}
	s = openT(t, path, Options{NoSync: true})
	if got, err := s.InstanceTypeInfo(); err != nil || string(got) != string(info) {
		t.Errorf("InstanceTypeInfo() after reopen = %q, %v; want %q", got, err, info)
	}
}
