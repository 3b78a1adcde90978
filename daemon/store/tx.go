package store

import (
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Tx is a read-write transaction handed to Store.Update. Its reads see its
// own writes. It must not be used after the Update function returns, nor
// from another goroutine.
type Tx struct {
	store *Store
	btx   *bolt.Tx
	done  bool
	ops   []op
	// err is the first damage bbolt met under this transaction; Update
	// then fails (and rolls back) even if fn ignored it.
	err error
}

// op is one committed change, replayed into the mirror after the commit.
type op struct {
	bucket string
	key    string
	del    bool
	val    any // Attachment, PodInfo or Intent as it reads back
}

func (o op) apply(s *Store) {
	switch o.bucket {
	case bucketAttachments:
		applyOp(s.attachments, o)
	case bucketPods:
		applyOp(s.pods, o)
	case bucketIntents:
		applyOp(s.intents, o)
	}
}

func applyOp[T record](m map[string]T, o op) {
	if o.del {
		delete(m, o.key)
		return
	}
	m[o.key] = o.val.(T)
}

func (t *Tx) check() error {
	if t.done {
		return ErrTxDone
	}
	return nil
}

// guard runs one bbolt operation of this transaction, turning a bbolt panic
// or fault (a damaged page) into an error wrapping ErrDamaged.
func (t *Tx) guard(what string, f func() error) error {
	err := faultTolerant(what, f)
	if errors.Is(err, ErrDamaged) && t.err == nil {
		t.err = err
	}
	return err
}

func txPut[T record](t *Tx, bucket string, v T) error {
	if err := t.check(); err != nil {
		return err
	}
	key, data, back, err := encode(v)
	if err != nil {
		return fmt.Errorf("put %s: %w", bucket, err)
	}
	if err := t.guard("writing it", func() error { return t.btx.Bucket([]byte(bucket)).Put([]byte(key), data) }); err != nil {
		return fmt.Errorf("put %s %s: %w", bucket, key, err)
	}
	t.ops = append(t.ops, op{bucket: bucket, key: key, val: back})
	return nil
}

func txGet[T record](t *Tx, bucket, what, key string) (T, error) {
	var zero T
	if err := t.check(); err != nil {
		return zero, err
	}
	var data []byte
	if err := t.guard("reading it", func() error {
		if d := t.btx.Bucket([]byte(bucket)).Get([]byte(key)); d != nil {
			data = slices.Clone(d)
		}
		return nil
	}); err != nil {
		return zero, fmt.Errorf("get %s %s: %w", bucket, key, err)
	}
	if data == nil {
		return zero, fmt.Errorf("%s %s: %w", what, key, ErrNotFound)
	}
	v, err := decode[T]([]byte(key), data)
	if err != nil {
		return zero, fmt.Errorf("get %s: %w", bucket, err)
	}
	return v, nil
}

func txDelete(t *Tx, bucket, key string) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := t.guard("writing it", func() error { return t.btx.Bucket([]byte(bucket)).Delete([]byte(key)) }); err != nil {
		return fmt.Errorf("delete %s %s: %w", bucket, key, err)
	}
	t.ops = append(t.ops, op{bucket: bucket, key: key, del: true})
	return nil
}

func txList[T record](t *Tx, bucket string) ([]T, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	var out []T
	err := t.guard("reading it", func() error {
		return t.btx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error {
			rec, err := decode[T](k, v)
			if err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", bucket, err)
	}
	return out, nil
}

// Put stores a, replacing any attachment with the same key.
func (t *Tx) Put(a Attachment) error { return txPut(t, bucketAttachments, a) }

// Get returns the attachment of pod namespace/name as of this transaction,
// or an error wrapping ErrNotFound.
func (t *Tx) Get(namespace, name string) (Attachment, error) {
	if err := validPodRef(namespace, name); err != nil {
		return Attachment{}, fmt.Errorf("get attachment: %w", err)
	}
	return txGet[Attachment](t, bucketAttachments, "attachment", namespace+"/"+name)
}

// Delete removes the attachment of pod namespace/name (absent is not an
// error).
func (t *Tx) Delete(namespace, name string) error {
	if err := validPodRef(namespace, name); err != nil {
		return fmt.Errorf("delete attachment: %w", err)
	}
	return txDelete(t, bucketAttachments, namespace+"/"+name)
}

// List returns every attachment as of this transaction, sorted by key.
func (t *Tx) List() ([]Attachment, error) { return txList[Attachment](t, bucketAttachments) }

// PutPod stores p, replacing any PodInfo with the same key.
func (t *Tx) PutPod(p PodInfo) error { return txPut(t, bucketPods, p) }

// GetPod returns the PodInfo of namespace/name as of this transaction, or an
// error wrapping ErrNotFound.
func (t *Tx) GetPod(namespace, name string) (PodInfo, error) {
	if err := validPodRef(namespace, name); err != nil {
		return PodInfo{}, fmt.Errorf("get pod: %w", err)
	}
	return txGet[PodInfo](t, bucketPods, "pod", namespace+"/"+name)
}

// DeletePod removes the PodInfo of namespace/name (absent is not an error).
func (t *Tx) DeletePod(namespace, name string) error {
	if err := validPodRef(namespace, name); err != nil {
		return fmt.Errorf("delete pod: %w", err)
	}
	return txDelete(t, bucketPods, namespace+"/"+name)
}

// ListPods returns every PodInfo as of this transaction, sorted by key.
func (t *Tx) ListPods() ([]PodInfo, error) { return txList[PodInfo](t, bucketPods) }

// PutIntent stores in, replacing any intent with the same Key.
func (t *Tx) PutIntent(in Intent) error { return txPut(t, bucketIntents, in) }

// GetIntent returns the intent under key as of this transaction, or an error
// wrapping ErrNotFound.
func (t *Tx) GetIntent(key string) (Intent, error) {
	return txGet[Intent](t, bucketIntents, "intent", key)
}

// DeleteIntent removes the intent under key (absent is not an error).
func (t *Tx) DeleteIntent(key string) error {
	if key == "" {
		return fmt.Errorf("delete intent: empty key")
	}
	return txDelete(t, bucketIntents, key)
}

// ListIntents returns every intent as of this transaction, sorted by key.
func (t *Tx) ListIntents() ([]Intent, error) { return txList[Intent](t, bucketIntents) }
