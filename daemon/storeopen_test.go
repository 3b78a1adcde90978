package daemon

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terway-sim/terway/daemon/kubeapi/clientset"
	"github.com/terway-sim/terway/daemon/mode"
	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/daemon/store/storetest"
	"github.com/terway-sim/terway/internal/testwait"
)

// nodeEventsOf lists the events about the lab's node with reason.
func nodeEventsOf(t *testing.T, l *lab, reason string) []corev1.Event {
	t.Helper()
	evs, err := l.kube.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == nodeName && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func asideFiles(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + store.DamagedSuffix + "*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newDaemon(t *testing.T, l *lab, mutate func(*Options)) (*Daemon, error) {
	t.Helper()
	o := Options{Mode: mode.ENIMultiIP, Config: l.daemonConfig(), NodeName: nodeName, Kube: clientset.Wrap(l.kube), StoreNoSync: true}
	if mutate != nil {
		mutate(&o)
	}
	d, err := New(ctxT(t), o)
	if err == nil {
		t.Cleanup(func() { _ = d.Close() })
	}
	return d, err
}

// A damaged store used to make bbolt panic in New: a crash loop with a Go
// stack. Now New refuses it with one line naming the file and
// --rebuild-store, and the node gets a Warning event saying the same.
func TestDamagedStoreIsRefusedWithNodeEvent(t *testing.T) {
	l := newLab(t)
	path := l.daemonConfig().StorePath
	before := storetest.Damaged(t, path)
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("New panicked: %v", r)
			}
		}()
		_, err = newDaemon(t, l, nil)
	}()
	if !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("New: %v, want store.ErrDamaged", err)
	}
	for _, want := range []string{path, "--rebuild-store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	evs := nodeEventsOf(t, l, ReasonStoreDamaged)
	if len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning || !strings.Contains(evs[0].Message, path) ||
		!strings.Contains(evs[0].Message, "--rebuild-store") {
		t.Fatalf("StoreDamaged node events: %+v", evs)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the refused store was modified")
	}
	if m := asideFiles(t, path); len(m) != 0 {
		t.Errorf("moved aside without --rebuild-store: %v", m)
	}
	t.Logf("%v", err)
}

// --rebuild-store moves the damaged file aside and starts on a new store.
func TestRebuildStoreMovesDamagedStoreAside(t *testing.T) {
	l := newLab(t)
	path := l.daemonConfig().StorePath
	before := storetest.Damaged(t, path)
	d, _, _ := l.daemon(func(o *Options) { o.RebuildStore = true })
	m := asideFiles(t, path)
	if len(m) != 1 {
		t.Fatalf("files moved aside: %v", m)
	}
	fi, err := os.Stat(m[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("moved-aside file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(m[0]); !bytes.Equal(b, before) {
		t.Error("the moved-aside file is not the damaged store")
	}
	if _, err := d.store.List(); err != nil {
		t.Errorf("new store: %v", err)
	}
	testwait.Until(t, 10*time.Second, "a StoreRebuilt node event", func() bool { return len(nodeEventsOf(t, l, ReasonStoreRebuilt)) > 0 })
	if ev := nodeEventsOf(t, l, ReasonStoreRebuilt)[0]; !strings.Contains(ev.Message, m[0]) {
		t.Errorf("StoreRebuilt event does not name %s: %q", m[0], ev.Message)
	}
}

// --rebuild-store never moves the store of a node whose lock another
// daemon holds: New fails on the lock first and nothing is moved.
func TestRebuildStoreRefusedWhileAnotherDaemonHoldsTheLock(t *testing.T) {
	l := newLab(t)
	cfg := l.daemonConfig()
	before := storetest.Damaged(t, cfg.StorePath)
	lock, err := takeLock(filepath.Join(filepath.Dir(cfg.SocketPath), "terwayd.lock"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, err = newDaemon(t, l, func(o *Options) { o.RebuildStore = true; o.LockTimeout = 200 * time.Millisecond })
	if err == nil || !strings.Contains(err.Error(), "another terwayd holds") {
		t.Fatalf("New with the node lock held: %v, want the lock error", err)
	}
	if after, _ := os.ReadFile(cfg.StorePath); !bytes.Equal(before, after) {
		t.Error("the store was modified")
	}
	if m := asideFiles(t, cfg.StorePath); len(m) != 0 {
		t.Errorf("moved aside while another daemon holds the lock: %v", m)
	}
	if evs := nodeEventsOf(t, l, ReasonStoreRebuilt); len(evs) != 0 {
		t.Errorf("StoreRebuilt events: %+v", evs)
	}
}
