package fakecloud

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/terway-sim/terway/internal/atomicfile"
)

// Persistence keeps the world in two files: a JSON snapshot at the state
// path and an append-only journal next to it. Every committed change is
// written to the journal before the API answers, so a fakecloud killed at
// any point restarts with every change it acknowledged (the journal lives
// in the page cache; only a machine crash could lose its tail). The
// journal is folded into a new snapshot at start, at Close and when it
// grows past compactBytes.
const compactBytes = 64 << 20

// recordKind is a persisted map of the state, as journal records name
// it (kindNames).
type recordKind int

// The record kinds, in the order a journal write lists them.
const (
	kindENI recordKind = iota
	kindInstance
	kindEIP
	kindRoute
	kindToken
	kindSTS
	kindSG
	kindDrain
	numKinds
)

var kindNames = [numKinds]string{kindENI: "eni", kindInstance: "instance", kindEIP: "eip", kindRoute: "route",
	kindToken: "token", kindSTS: "sts", kindSG: "sg", kindDrain: "drain"}

// dirtySet names the objects a locked section changed.
type dirtySet struct {
	ids      [numKinds]map[string]bool
	settings bool
}

func (d *dirtySet) mark(k recordKind, id string) {
	if d.ids[k] == nil {
		d.ids[k] = map[string]bool{}
	}
	d.ids[k][id] = true
}

func (d *dirtySet) eni(id string)      { d.mark(kindENI, id) }
func (d *dirtySet) instance(id string) { d.mark(kindInstance, id) }
func (d *dirtySet) eip(id string)      { d.mark(kindEIP, id) }
func (d *dirtySet) route(id string)    { d.mark(kindRoute, id) }
func (d *dirtySet) token(id string)    { d.mark(kindToken, id) }
func (d *dirtySet) cred(id string)     { d.mark(kindSTS, id) }
func (d *dirtySet) sg(id string)       { d.mark(kindSG, id) }
func (d *dirtySet) drain(id string)    { d.mark(kindDrain, id) }

func (d *dirtySet) reset() { *d = dirtySet{} }

func (d *dirtySet) empty() bool {
	for _, ids := range d.ids {
		if len(ids) > 0 {
			return false
		}
	}
	return !d.settings
}

// table is one persisted map of the state, seen by the journal: replaying
// a record into it, and reading an object out of it.
type table struct {
	upsert func(id string, v json.RawMessage, del bool) error
	value  func(id string) (any, bool)
}

func tableOf[T any](m map[string]*T) table {
	return table{
		upsert: func(id string, v json.RawMessage, del bool) error { return upsert(m, id, v, del) },
		value: func(id string) (any, bool) {
			x, ok := m[id]
			return x, ok
		},
	}
}

// journalTables returns the persisted maps by kind. The maps are made at
// load and never replaced, so the table is made once.
func (st *state) journalTables() *[numKinds]table {
	if st.tables == nil {
		st.tables = &[numKinds]table{kindENI: tableOf(st.ENIs), kindInstance: tableOf(st.Instances),
			kindEIP: tableOf(st.EIPs), kindRoute: tableOf(st.Routes), kindToken: tableOf(st.Tokens),
			kindSTS: tableOf(st.STS), kindSG: tableOf(st.SecurityGroups), kindDrain: tableOf(st.Drains)}
	}
	return st.tables
}

// record is one journal line: an object upserted, or deleted when V is
// absent.
type record struct {
	K  string          `json:"k"`
	ID string          `json:"id,omitempty"`
	V  json.RawMessage `json:"v,omitempty"`
}

type journal struct {
	path string
	f    *os.File
	size int64
	buf  bytes.Buffer
	// scratch is reused for hand-encoded records.
	scratch []byte
}

// openState loads the world from path (snapshot plus journal) or, when
// there is none, builds it from spec. path "" means in memory only.
func openState(path string, spec Spec, seed int64, now time.Time, log *slog.Logger) (*state, *journal, error) {
	if path == "" {
		st, err := newState(spec, seed, now)
		return st, nil, err
	}
	st, err := loadSnapshot(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := checkOrphanJournal(path, log); err != nil {
			return nil, nil, err
		}
		st, err = newState(spec, seed, now)
		if err != nil {
			return nil, nil, err
		}
		log.Info("new world", "state", path)
	case err != nil:
		return nil, nil, err
	default:
		n, err := replayJournal(st, path+".journal")
		if err != nil {
			return nil, nil, err
		}
		if err := st.derive(); err != nil {
			return nil, nil, fmt.Errorf("load state %s: %w", path, err)
		}
		log.Info("world restored", "state", path, "journalRecords", n, "enis", len(st.ENIs), "instances", len(st.Instances))
	}
	jr := &journal{path: path}
	if err := jr.compact(st); err != nil {
		return nil, nil, err
	}
	return st, jr, nil
}

// checkOrphanJournal runs when the snapshot at path is missing. A journal
// without its snapshot holds acknowledged changes that cannot be replayed
// (records are relative to the snapshot), and starting a new world would
// truncate it: refuse, naming both files, so an operator restores the
// snapshot or moves the journal away on purpose. An empty journal carries
// nothing (a crash between creating it and the first write), so it is
// removed with a warning.
func checkOrphanJournal(path string, log *slog.Logger) error {
	jpath := path + ".journal"
	fi, err := os.Stat(jpath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("state file %s is missing; checking journal: %w", path, err)
	case fi.Size() > 0:
		return fmt.Errorf("state file %s is missing but its journal %s holds %d bytes of acknowledged changes: "+
			"refusing to start a new world over them (restore %s, or move %s away to start afresh)",
			path, jpath, fi.Size(), path, jpath)
	}
	log.Warn("removing empty journal without a snapshot", "state", path, "journal", jpath)
	if err := os.Remove(jpath); err != nil {
		return fmt.Errorf("remove empty journal %s: %w", jpath, err)
	}
	return nil
}

func loadSnapshot(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("state file %s is not a fakecloud snapshot: %w", path, err)
	}
	if st.Seq == nil || st.Instances == nil || st.ENIs == nil {
		return nil, fmt.Errorf("state file %s is not a fakecloud snapshot: missing sections", path)
	}
	ensureMap(&st.EIPs)
	ensureMap(&st.Routes)
	ensureMap(&st.Tokens)
	ensureMap(&st.STS)
	ensureMap(&st.SecurityGroups)
	ensureMap(&st.Drains)
	return st, nil
}

// replayJournal applies journal records to st. A torn last line (the
// process died mid-write) is ignored: its change was never acknowledged.
func replayJournal(st *state, path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return n, nil // a line without newline is a torn write
		}
		if err != nil {
			return n, err
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil {
			return n, fmt.Errorf("journal %s record %d: %w", path, n+1, err)
		}
		if err := st.apply(rec); err != nil {
			return n, fmt.Errorf("journal %s record %d: %w", path, n+1, err)
		}
		n++
	}
}

func (st *state) apply(rec record) error {
	switch rec.K {
	case "seq":
		return json.Unmarshal(rec.V, &st.Seq)
	case "settings":
		return json.Unmarshal(rec.V, &st.Spec.Settings)
	}
	for k, name := range kindNames {
		if name == rec.K {
			return st.journalTables()[k].upsert(rec.ID, rec.V, len(rec.V) == 0)
		}
	}
	return fmt.Errorf("unknown record kind %q", rec.K)
}

func ensureMap[T any](m *map[string]*T) {
	if *m == nil {
		*m = map[string]*T{}
	}
}

func upsert[T any](m map[string]*T, id string, v json.RawMessage, del bool) error {
	if del {
		delete(m, id)
		return nil
	}
	x := new(T)
	if err := json.Unmarshal(v, x); err != nil {
		return err
	}
	m[id] = x
	return nil
}

// write appends the changed objects of d to the journal in one write:
// their current value, or a deletion for those that are gone.
func (j *journal) write(st *state, d *dirtySet) error {
	if d.empty() && !st.seqDirty {
		return nil
	}
	j.buf.Reset()
	var err error
	for k, ids := range d.ids {
		t := st.journalTables()[k]
		for id := range ids {
			v, ok := t.value(id)
			err = errors.Join(err, j.encode(kindNames[k], id, v, ok))
		}
	}
	if st.seqDirty {
		err = errors.Join(err, j.encode("seq", "", st.Seq, true))
		st.seqDirty = false
	}
	if d.settings {
		err = errors.Join(err, j.encode("settings", "", st.Spec.Settings, true))
	}
	if err != nil {
		return err
	}
	n, err := j.f.Write(j.buf.Bytes())
	j.size += int64(n)
	if err != nil {
		return err
	}
	if j.size > compactBytes {
		return j.compact(st)
	}
	return nil
}

// encode adds one record to the buffer: v under kind and id, or (present
// false) the deletion of id. Records are written by hand around the
// object's JSON: marshalling a record that embeds a RawMessage would
// re-validate every byte.
func (j *journal) encode(kind, id string, v any, present bool) error {
	j.buf.WriteString(`{"k":"`)
	j.buf.WriteString(kind)
	j.buf.WriteString(`","id":`)
	idb, err := json.Marshal(id)
	if err != nil {
		return err
	}
	j.buf.Write(idb)
	if present {
		j.buf.WriteString(`,"v":`)
		if e, ok := v.(*eni); ok {
			j.scratch = appendENI(j.scratch[:0], e)
			j.buf.Write(j.scratch)
		} else {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			j.buf.Write(b)
		}
	}
	j.buf.WriteString("}\n")
	return nil
}

// compact writes a fresh snapshot (atomically, mode 0600) and starts an
// empty journal.
func (j *journal) compact(st *state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	if err := atomicfile.Write(j.path, data, 0o600); err != nil {
		return err
	}
	if j.f != nil {
		j.f.Close()
	}
	f, err := os.OpenFile(j.path+".journal", os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	j.f, j.size = f, 0
	return nil
}

func (j *journal) close(st *state) error {
	err := j.compact(st)
	if j.f != nil {
		err = errors.Join(err, j.f.Close())
		j.f = nil
	}
	return err
}
