package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the version of the layout this package reads and writes.
// Bump it for any change to the buckets or to a record's shape.
// Schema 2 added meta/instance; a schema-1 file is migrated at Open.
const SchemaVersion = 2

// WriterName is the value of meta/writer in a DB this package created.
const WriterName = "terway-sim"

// DefaultTimeout is how long Open waits for bbolt's file lock when
// Options.Timeout is zero.
const DefaultTimeout = 2 * time.Second

// Bucket and meta key names.
const (
	bucketMeta        = "meta"
	bucketAttachments = "attachments"
	bucketPods        = "pods"
	bucketIntents     = "intents"
	// bucketRelation is Terway's pod -> resources bucket (ResRelation.db).
	bucketRelation = "relation"

	metaSchema   = "schema"
	metaWriter   = "writer"
	metaInstance = "instance"
	// metaInstanceType is a cache, not a record: the cloud's description
	// of the instance's type (JSON), so that a restart need not ask the
	// cloud again. A daemon that does not know it leaves it alone.
	metaInstanceType    = "instance_type_info"
	metaImportedAt      = "terway_imported_at"
	metaImportedRecords = "terway_imported_records"
	metaRelationHash    = "terway_relation_sha256"
)

// Errors returned by Open (wrapped, with the path and the details); test
// them with errors.Is.
var (
	// ErrLocked: another process (or another Store in this one) holds the
	// file.
	ErrLocked = errors.New("database file is locked by another process")
	// ErrTerwayDB: the file was written by Terway and Options.ImportTerway
	// is off.
	ErrTerwayDB = errors.New("database was written by Terway")
	// ErrNewerSchema: the file was written by a newer daemon.
	ErrNewerSchema = errors.New("written by a newer daemon")
	// ErrUnknownFormat: the file is not a bbolt database (or its meta
	// pages are unreadable), or holds buckets or records this package does
	// not know. A bbolt file whose other pages are damaged is ErrDamaged.
	ErrUnknownFormat = errors.New("not a terway-sim store")
)

// Errors returned by the record operations.
var (
	// ErrNotFound: no record under that key.
	ErrNotFound = errors.New("not found")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store is closed")
	// ErrTxDone: a Tx was used after its Update function returned.
	ErrTxDone = errors.New("transaction already finished")
)

// Options configure Open. The zero value is the production setting (fsync
// on every commit, DefaultTimeout, no Terway import).
type Options struct {
	// Timeout bounds the wait for bbolt's exclusive file lock; zero means
	// DefaultTimeout. Open never waits forever.
	Timeout time.Duration
	// NoSync skips fsync on commit. For tests only: a crash may lose or
	// corrupt committed data.
	NoSync bool
	// ImportTerway allows reading a Terway-written DB: its "relation"
	// records are imported as Attachments (see the package doc). Without
	// it such a file is refused with ErrTerwayDB.
	ImportTerway bool
	// Now is the clock used for import bookkeeping; nil means time.Now.
	Now func() time.Time
}

// Store is the daemon's local store. Its methods are safe for concurrent
// use.
type Store struct {
	path     string
	db       *bolt.DB
	warnings []string
	// schema is the version the file had at Open (before any migration).
	schema int

	// wmu serialises write transactions, their mirror updates and Close.
	wmu sync.Mutex
	// mu guards the mirror and closed.
	mu          sync.RWMutex
	closed      bool
	instance    string
	attachments map[string]Attachment
	pods        map[string]PodInfo
	intents     map[string]Intent
}

// Open opens (creating if needed) the store at path. See the package doc for
// what it accepts and refuses. The returned Store's Warnings say what Open
// changed or noticed (a file mode fixed, a Terway import).
func Open(path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open store: empty path")
	}
	path = filepath.Clean(path)
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: create parent directory: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		what := "a " + fi.Mode().Type().String()
		if fi.IsDir() {
			what = "a directory"
		}
		return nil, fmt.Errorf("open store %s: %w: not a regular file (%s)", path, ErrUnknownFormat, what)
	}

	db, file, err := openBolt(path, bolt.Options{Timeout: opts.Timeout, NoSync: opts.NoSync})
	switch {
	case errors.Is(err, ErrDamaged):
		return nil, refuseDamaged(path, err)
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open store %s: %w (lock timeout %s; is another terwayd running?): %w",
			path, ErrLocked, opts.Timeout, err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("open store %s: %w: the file is not a bbolt database or is corrupt; refusing to touch it: %w",
			path, ErrUnknownFormat, err)
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}

	s := &Store{
		path:        path,
		db:          db,
		attachments: map[string]Attachment{},
		pods:        map[string]PodInfo{},
		intents:     map[string]Intent{},
	}
	// Nothing is written before the whole file has been read and checked.
	err = s.verify()
	if err == nil {
		err = faultTolerant("loading it", func() error { return s.load(opts) })
	}
	if err != nil {
		closeBolt(db, file)
		if errors.Is(err, ErrDamaged) {
			return nil, refuseDamaged(path, err)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// Only a file we accepted is touched; we hold bbolt's lock here.
	if err := s.fixMode(); err != nil {
		closeBolt(db, file)
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// refuseDamaged is Open's one-line error for a damaged file: the path, what
// is wrong, and how to recover.
func refuseDamaged(path string, err error) error {
	return fmt.Errorf("open store %s: %w; refusing to read it; %s", path, err, RebuildHint)
}

func (s *Store) fixMode() error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		if err := os.Chmod(s.path, 0o600); err != nil {
			return fmt.Errorf("chmod 0600 (was %#o): %w", perm, err)
		}
		s.warnings = append(s.warnings, fmt.Sprintf("store %s had mode %#o; changed it to 0600", s.path, perm))
	}
	return s.fixDirMode()
}

// fixDirMode makes the store's directory 0700, whatever mode it had. A
// shared directory (sticky bit, as /tmp) or the root is left alone, with a
// warning: the store belongs in a directory of its own.
func (s *Store) fixDirMode() error {
	dir := filepath.Dir(s.path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat parent directory: %w", err)
	}
	perm := fi.Mode().Perm()
	switch {
	case perm == 0o700:
		return nil
	case fi.Mode()&os.ModeSticky != 0 || dir == filepath.Dir(dir):
		s.warnings = append(s.warnings, fmt.Sprintf(
			"store %s is in the shared directory %s (mode %#o); not changing it: give the store a directory of its own",
			s.path, dir, fi.Mode()&(os.ModePerm|os.ModeSticky)))
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod parent directory %s 0700 (was %#o): %w", dir, perm, err)
	}
	s.warnings = append(s.warnings, fmt.Sprintf("store directory %s had mode %#o; changed it to 0700", dir, perm))
	return nil
}

// load classifies the file by its buckets and reads it, initialises it or
// imports it, or refuses it.
func (s *Store) load(opts Options) error {
	var names []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, string(name))
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("list buckets: %w", err)
	}
	has := func(n string) bool { return slices.Contains(names, n) }

	switch {
	case len(names) == 0:
		if err := s.db.Update(func(tx *bolt.Tx) error { return initSchema(tx) }); err != nil {
			return fmt.Errorf("initialise schema %d: %w", SchemaVersion, err)
		}
		return nil
	case has(bucketMeta):
		if err := s.readOurs(names); err != nil {
			return err
		}
		return s.migrate()
	case has(bucketRelation):
		if others := without(names, bucketRelation); len(others) > 0 {
			return fmt.Errorf("%w: it has Terway's bucket %q but also %s and no %q bucket; refusing to read it",
				ErrUnknownFormat, bucketRelation, quoteAll(others), bucketMeta)
		}
		if !opts.ImportTerway {
			return fmt.Errorf("%w (bucket %q, no %q bucket) and Terway import is off; refusing to read it. "+
				"To proceed, either enable the import (Options.ImportTerway: its records are copied into this store, "+
				"the %q bucket is left untouched), or move the file away to start with an empty store",
				ErrTerwayDB, bucketRelation, bucketMeta, bucketRelation)
		}
		return s.importTerway(opts.Now())
	case len(names) == 1 && has(bucketPods):
		return fmt.Errorf("%w: it looks like Terway's pod cache (pod.db: only a bucket %q, no %q bucket), "+
			"which holds no allocations and cannot be imported; refusing to read it (point the store at another file)",
			ErrUnknownFormat, bucketPods, bucketMeta)
	default:
		return fmt.Errorf("%w: unknown buckets %s and no %q bucket; refusing to read it",
			ErrUnknownFormat, quoteAll(names), bucketMeta)
	}
}

// initSchema creates our buckets and meta in tx.
func initSchema(tx *bolt.Tx) error {
	meta, err := tx.CreateBucket([]byte(bucketMeta))
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", bucketMeta, err)
	}
	if err := meta.Put([]byte(metaSchema), []byte(strconv.Itoa(SchemaVersion))); err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	if err := meta.Put([]byte(metaWriter), []byte(WriterName)); err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	for _, b := range []string{bucketAttachments, bucketPods, bucketIntents} {
		if _, err := tx.CreateBucket([]byte(b)); err != nil {
			return fmt.Errorf("create bucket %q: %w", b, err)
		}
	}
	return nil
}

// readOurs checks meta and the bucket set, then loads every record into the
// mirror.
func (s *Store) readOurs(names []string) error {
	return s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		writer := string(meta.Get([]byte(metaWriter)))
		if writer != WriterName {
			return fmt.Errorf("%w: its %q bucket names writer %q, not %q; refusing to read it",
				ErrUnknownFormat, bucketMeta, writer, WriterName)
		}
		raw := string(meta.Get([]byte(metaSchema)))
		schema, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("%w: unreadable schema version %q; refusing to read it", ErrUnknownFormat, raw)
		}
		if schema > SchemaVersion {
			return fmt.Errorf("%w (schema %d > %d); refusing to read it", ErrNewerSchema, schema, SchemaVersion)
		}
		if schema < 1 {
			return fmt.Errorf("%w: schema version %d was never written by %s; refusing to read it",
				ErrUnknownFormat, schema, WriterName)
		}
		s.schema = schema
		if schema >= 2 {
			s.instance = string(meta.Get([]byte(metaInstance)))
		}
		// An older schema is migrated (by migrate) once it has been read.
		known := []string{bucketMeta, bucketAttachments, bucketPods, bucketIntents, bucketRelation}
		var unknown []string
		for _, n := range names {
			if !slices.Contains(known, n) {
				unknown = append(unknown, n)
			}
		}
		if len(unknown) > 0 {
			return fmt.Errorf("%w: schema %d has no bucket %s; refusing to read it",
				ErrUnknownFormat, schema, quoteAll(unknown))
		}
		for _, n := range []string{bucketAttachments, bucketPods, bucketIntents} {
			if !slices.Contains(names, n) {
				return fmt.Errorf("%w: schema %d but bucket %q is missing; refusing to read it",
					ErrUnknownFormat, schema, n)
			}
		}
		if err := loadBucket(tx, bucketAttachments, s.attachments); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketPods, s.pods); err != nil {
			return err
		}
		if err := loadBucket(tx, bucketIntents, s.intents); err != nil {
			return err
		}
		s.checkRelation(tx, meta)
		return nil
	})
}

// migrate brings a file of an older schema (read by readOurs) to
// SchemaVersion:
//
//	1 -> 2: meta/instance added; the instance of a migrated file is unknown.
func (s *Store) migrate() error {
	if s.schema == SchemaVersion {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchema), []byte(strconv.Itoa(SchemaVersion)))
	})
	if err != nil {
		return fmt.Errorf("migrate schema %d to %d: %w", s.schema, SchemaVersion, err)
	}
	s.warnings = append(s.warnings, fmt.Sprintf("store %s: migrated from schema %d to %d (the instance it belongs to is unknown)",
		s.path, s.schema, SchemaVersion))
	return nil
}

// checkRelation warns when Terway's bucket changed after (or appeared
// without) an import: its content is never read again, so the operator
// should know it diverged.
func (s *Store) checkRelation(tx *bolt.Tx, meta *bolt.Bucket) {
	rel := tx.Bucket([]byte(bucketRelation))
	if rel == nil {
		return
	}
	want := string(meta.Get([]byte(metaRelationHash)))
	switch {
	case want == "":
		s.warnings = append(s.warnings, fmt.Sprintf(
			"store %s: bucket %q exists but was never imported (Terway wrote to this file?); it is ignored", s.path, bucketRelation))
	case relationHash(rel) != want:
		s.warnings = append(s.warnings, fmt.Sprintf(
			"store %s: bucket %q changed since it was imported at %s (Terway wrote to this file?); the changes are ignored",
			s.path, bucketRelation, meta.Get([]byte(metaImportedAt))))
	}
}

func loadBucket[T record](tx *bolt.Tx, bucket string, into map[string]T) error {
	return tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error {
		if v == nil {
			return fmt.Errorf("%w: bucket %q holds a nested bucket %q; refusing to read it", ErrUnknownFormat, bucket, k)
		}
		rec, err := decode[T](k, v)
		if err != nil {
			// Our own bucket of a schema we know: the record was written
			// by us, so it is damage (and still not a format we read).
			return fmt.Errorf("%w: bucket %q: %w (%w)", ErrDamaged, bucket, err, ErrUnknownFormat)
		}
		into[string(k)] = rec
		return nil
	})
}

func without(names []string, drop string) []string {
	var out []string
	for _, n := range names {
		if n != drop {
			out = append(out, n)
		}
	}
	return out
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// Path returns the store's file path (cleaned).
func (s *Store) Path() string { return s.path }

// Warnings returns what Open changed or noticed: a file mode fixed to 0600,
// the directory's to 0700, a schema migration, a Terway import, Terway's
// bucket changed after an import.
func (s *Store) Warnings() []string { return slices.Clone(s.warnings) }

// Instance returns the ECS instance ID the store belongs to (meta/instance),
// or "" when it is unknown: a new file, a file migrated from schema 1, a
// Terway import, until SetInstance is called.
func (s *Store) Instance() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.instance
}

// SetInstance records the ECS instance ID the store belongs to; "" forgets
// it. It is committed (and fsync-ed) before it returns.
func (s *Store) SetInstance(id string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	if err := s.putMetaLocked(metaInstance, []byte(id)); err != nil {
		return fmt.Errorf("store %s: set instance: %w", s.path, err)
	}
	s.mu.Lock()
	s.instance = id
	s.mu.Unlock()
	return nil
}

// InstanceTypeInfo returns what SetInstanceTypeInfo recorded, or nil.
func (s *Store) InstanceTypeInfo() ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket([]byte(bucketMeta)).Get([]byte(metaInstanceType)))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: read the instance type: %w", s.path, err)
	}
	return out, nil
}

// SetInstanceTypeInfo records the cloud's description of the instance's
// type (the caller checks it against the instance when it reads it back).
func (s *Store) SetInstanceTypeInfo(info []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	if err := s.putMetaLocked(metaInstanceType, info); err != nil {
		return fmt.Errorf("store %s: set the instance type: %w", s.path, err)
	}
	return nil
}

// putMetaLocked commits (and fsyncs) value under key in the meta bucket;
// an empty value deletes the key. The caller holds wmu.
func (s *Store) putMetaLocked(key string, value []byte) error {
	return faultTolerant("writing it", func() error {
		return s.db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket([]byte(bucketMeta))
			if len(value) == 0 {
				return meta.Delete([]byte(key))
			}
			return meta.Put([]byte(key), value)
		})
	})
}

// Close closes the store; later calls return ErrClosed. Closing twice is a
// no-op.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.attachments, s.pods, s.intents = nil, nil, nil
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// Update runs fn in one read-write transaction: every change fn makes
// through tx is committed (and fsync-ed) together, or none is. If fn returns
// an error, the transaction is rolled back and Update returns that error
// unchanged. The in-memory mirror is updated only after the commit.
// Updates are serialised; fn must not call the Store's own methods.
func (s *Store) Update(fn func(tx *Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	t := &Tx{store: s}
	var fnErr error
	var fnPanic any
	err := faultTolerant("writing it", func() error {
		return s.db.Update(func(btx *bolt.Tx) error {
			t.btx = btx
			defer func() { t.done = true }()
			// A panic of fn itself is the caller's bug, not damage: it
			// is re-raised once bbolt has rolled the transaction back.
			defer func() {
				if r := recover(); r != nil {
					fnPanic = r
					panic(r)
				}
			}()
			fnErr = fn(t)
			if fnErr == nil && t.err != nil {
				// bbolt failed under an operation fn did not check.
				fnErr = t.err
			}
			return fnErr
		})
	})
	t.done = true
	if fnPanic != nil {
		panic(fnPanic)
	}
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("store %s: commit: %w", s.path, err)
	}
	s.mu.Lock()
	for _, o := range t.ops {
		o.apply(s)
	}
	s.mu.Unlock()
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// Put stores a, replacing any attachment with the same key.
func (s *Store) Put(a Attachment) error {
	return s.Update(func(tx *Tx) error { return tx.Put(a) })
}

// Get returns the attachment of pod namespace/name, or an error wrapping
// ErrNotFound.
func (s *Store) Get(namespace, name string) (Attachment, error) {
	if err := validPodRef(namespace, name); err != nil {
		return Attachment{}, fmt.Errorf("get attachment: %w", err)
	}
	return mirrorGet(s, func(s *Store) map[string]Attachment { return s.attachments }, "attachment", namespace+"/"+name)
}

// Delete removes the attachment of pod namespace/name; deleting an absent
// one is not an error.
func (s *Store) Delete(namespace, name string) error {
	return s.Update(func(tx *Tx) error { return tx.Delete(namespace, name) })
}

// List returns every attachment, sorted by key ("namespace/name").
func (s *Store) List() ([]Attachment, error) {
	return mirrorList(s, func(s *Store) map[string]Attachment { return s.attachments })
}

// PutPod stores the PodInfo of a pod that is gone, replacing any with the
// same key.
func (s *Store) PutPod(p PodInfo) error {
	return s.Update(func(tx *Tx) error { return tx.PutPod(p) })
}

// GetPod returns the stored PodInfo of namespace/name, or an error wrapping
// ErrNotFound.
func (s *Store) GetPod(namespace, name string) (PodInfo, error) {
	if err := validPodRef(namespace, name); err != nil {
		return PodInfo{}, fmt.Errorf("get pod: %w", err)
	}
	return mirrorGet(s, func(s *Store) map[string]PodInfo { return s.pods }, "pod", namespace+"/"+name)
}

// DeletePod removes the PodInfo of namespace/name; deleting an absent one is
// not an error.
func (s *Store) DeletePod(namespace, name string) error {
	return s.Update(func(tx *Tx) error { return tx.DeletePod(namespace, name) })
}

// ListPods returns every stored PodInfo, sorted by key.
func (s *Store) ListPods() ([]PodInfo, error) {
	return mirrorList(s, func(s *Store) map[string]PodInfo { return s.pods })
}

// PutIntent stores in, replacing any intent with the same Key. Call it (and
// let it return) before the cloud call it describes.
func (s *Store) PutIntent(in Intent) error {
	return s.Update(func(tx *Tx) error { return tx.PutIntent(in) })
}

// GetIntent returns the intent stored under key, or an error wrapping
// ErrNotFound.
func (s *Store) GetIntent(key string) (Intent, error) {
	return mirrorGet(s, func(s *Store) map[string]Intent { return s.intents }, "intent", key)
}

// DeleteIntent removes the intent stored under key; deleting an absent one is
// not an error.
func (s *Store) DeleteIntent(key string) error {
	return s.Update(func(tx *Tx) error { return tx.DeleteIntent(key) })
}

// ListIntents returns every intent, sorted by key.
func (s *Store) ListIntents() ([]Intent, error) {
	return mirrorList(s, func(s *Store) map[string]Intent { return s.intents })
}

func mirrorGet[T record](s *Store, m func(*Store) map[string]T, what, key string) (T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var zero T
	if s.closed {
		return zero, fmt.Errorf("get %s %s: %w", what, key, ErrClosed)
	}
	v, ok := m(s)[key]
	if !ok {
		return zero, fmt.Errorf("%s %s: %w", what, key, ErrNotFound)
	}
	return cloneOf(v), nil
}

func mirrorList[T record](s *Store, m func(*Store) map[string]T) ([]T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	return sortedClones(m(s)), nil
}

// Snapshot returns every attachment and every intent, each sorted by key,
// as of one moment: a transaction that moves a pod from an intent to an
// attachment is seen whole or not at all, which List then ListIntents
// cannot promise.
func (s *Store) Snapshot() ([]Attachment, []Intent, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, nil, fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	return sortedClones(s.attachments), sortedClones(s.intents), nil
}

// sortedClones returns copies of m's values, sorted by key.
func sortedClones[T record](m map[string]T) []T {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = cloneOf(m[k])
	}
	return out
}
