package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/terway-sim/terway/daemon/k8s"
	"github.com/terway-sim/terway/daemon/store"
)

// Node event reasons of the store.
const (
	// ReasonStoreDamaged: the store is damaged and the daemon refuses to
	// start (Warning); the message names the file and --rebuild-store.
	ReasonStoreDamaged = "StoreDamaged"
	// ReasonStoreRebuilt: a damaged store was moved aside and a new one
	// rebuilt from the node's truth (Warning: the operator asked for it,
	// but pods' records now come from the cloud, metadata and API server).
	ReasonStoreRebuilt = "StoreRebuilt"
)

// storeEventTimeout bounds the StoreDamaged event of a daemon that is about
// to exit.
const storeEventTimeout = 10 * time.Second

// openStore opens the store at store_path. A damaged one
// (store.ErrDamaged) is, with Options.RebuildStore, moved aside
// (store.MoveAside) and replaced by a new store that restore fills from the
// node's truth; without it, it is refused: a StoreDamaged node event is
// written (synchronously: the daemon is about to exit) and the error is
// returned. The node lock is held already, so another daemon's store is
// never moved.
func (d *Daemon) openStore(ctx context.Context) error {
	path := d.cfg.StorePath
	opts := store.Options{NoSync: d.opts.StoreNoSync, ImportTerway: d.opts.ImportTerwayDB}
	st, err := store.Open(path, opts)
	if errors.Is(err, store.ErrDamaged) && d.opts.RebuildStore {
		aside, merr := store.MoveAside(path, d.clock.Now(), 0)
		if merr != nil {
			return fmt.Errorf("rebuild store: %w (it was refused: %w)", merr, err)
		}
		msg := fmt.Sprintf("store %s was damaged: moved it to %s; rebuilding it from the node's ENIs, metadata and pods", path, aside)
		d.log.Warn(msg, "reason", ReasonStoreRebuilt, "err", err)
		d.kube.NodeEvent(k8s.Warning, ReasonStoreRebuilt, msg)
		st, err = store.Open(path, opts)
	}
	if err != nil {
		if errors.Is(err, store.ErrDamaged) {
			ectx, cancel := context.WithTimeout(ctx, storeEventTimeout)
			defer cancel()
			if eerr := d.kube.NodeEventNow(ectx, k8s.Warning, ReasonStoreDamaged, err.Error()); eerr != nil {
				d.log.Warn("could not record the node event", "reason", ReasonStoreDamaged, "err", eerr)
			}
		}
		return err
	}
	d.store = st
	for _, w := range st.Warnings() {
		d.log.Warn("store", "warning", w)
	}
	return nil
}
