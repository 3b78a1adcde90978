package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)

func openT(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "terway", "ResRelation.db")
	return openT(t, path, Options{NoSync: true}), path
}

func sampleAttachment(ns, name string) Attachment {
	return Attachment{
		PodNamespace: ns,
		PodName:      name,
		PodUID:       "uid-" + name,
		ContainerID:  "ctr-" + name,
		Netns:        "/var/run/netns/cni-" + name,
		IfName:       "eth0",
		IPType:       IPTypeENIMultiIP,
		Resources: []Resource{{
			Type: ResourceENIIP, ID: "00:16:3e:01:02:03.192.168.0.5",
			ENIID: "eni-abc", ENIMAC: "00:16:3e:01:02:03", IPv4: "192.168.0.5", IPv6: "fd00:192:168::5",
		}},
		NetConf:     json.RawMessage(`[{"BasicInfo":{"PodIP":{"IPv4":"192.168.0.5"}},"IfName":"eth0"}]`),
		CreatedAt:   t0,
		StickyUntil: t0.Add(5 * time.Minute),
		PodGone:     t0.Add(time.Minute),
	}
}

func samplePod(ns, name string) PodInfo {
	return PodInfo{
		Namespace: ns, Name: name, UID: "uid-" + name, IPType: IPTypeVPCENI,
		Annotations: map[string]string{"k8s.aliyun.com/pod-ip-reservation": "true"},
		OwnerKinds:  []string{"StatefulSet"},
		StickyIP:    true, Ingress: 1 << 20, Egress: 2 << 20, SeenAt: t0,
	}
}

func sampleIntent(key string) Intent {
	return Intent{
		Key: key, Kind: IntentAssignIPs, ClientToken: "tok-" + key, ENIID: "eni-abc",
		VSwitchID: "vsw-1", Count: 3, IPs: []string{"192.168.0.7", "192.168.0.8"}, CreatedAt: t0,
	}
}

func TestAttachmentRoundTrip(t *testing.T) {
	s, _ := newStore(t)
	a := sampleAttachment("default", "web-0")
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("default", "web-0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("Get = %+v\nwant %+v", got, a)
	}
	// Returned values are copies: changing them does not change the store.
	got.Resources[0].IPv4 = "10.0.0.1"
	got.NetConf[0] = 'x'
	again, _ := s.Get("default", "web-0")
	if !reflect.DeepEqual(again, a) {
		t.Fatalf("store changed through a returned value: %+v", again)
	}

	b := sampleAttachment("default", "api-1")
	b.IPType = IPTypeVPCIP
	b.Resources = []Resource{{Type: ResourceVPCIP, ID: "172.20.1.9", IPv4: "172.20.1.9"}}
	b.NetConf = json.RawMessage("{ \"x\" :\n 1 }")
	b.StickyUntil, b.PodGone = time.Time{}, time.Time{}
	if err := s.Put(b); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Key() != "default/api-1" || list[1].Key() != "default/web-0" {
		t.Fatalf("List not sorted by key: %v, %v", list[0].Key(), list[1].Key())
	}
	if string(list[0].NetConf) != `{"x":1}` {
		t.Errorf("NetConf stored as %s, want compacted {\"x\":1}", list[0].NetConf)
	}
	if !list[0].StickyUntil.IsZero() || !list[0].PodGone.IsZero() {
		t.Errorf("zero times did not round-trip as zero: %+v", list[0])
	}

	if err := s.Delete("default", "web-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("default", "web-0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete("default", "web-0"); err != nil {
		t.Fatalf("Delete of absent record: %v", err)
	}
}

func TestPodAndIntentRoundTrip(t *testing.T) {
	s, _ := newStore(t)
	p := samplePod("db", "mysql-0")
	if err := s.PutPod(p); err != nil {
		t.Fatal(err)
	}
	gp, err := s.GetPod("db", "mysql-0")
	if err != nil || !reflect.DeepEqual(gp, p) {
		t.Fatalf("GetPod = %+v, %v; want %+v", gp, err, p)
	}
	gp.Annotations["x"] = "y"
	if again, _ := s.GetPod("db", "mysql-0"); !reflect.DeepEqual(again, p) {
		t.Fatal("store changed through a returned map")
	}
	if err := s.PutPod(samplePod("a", "b")); err != nil {
		t.Fatal(err)
	}
	pods, err := s.ListPods()
	if err != nil || len(pods) != 2 || pods[0].Key() != "a/b" {
		t.Fatalf("ListPods = %v, %v", pods, err)
	}
	if err := s.DeletePod("db", "mysql-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPod("db", "mysql-0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetPod after delete: %v", err)
	}

	in := sampleIntent("assign/eni-abc/1")
	if err := s.PutIntent(in); err != nil {
		t.Fatal(err)
	}
	gi, err := s.GetIntent(in.Key)
	if err != nil || !reflect.DeepEqual(gi, in) {
		t.Fatalf("GetIntent = %+v, %v; want %+v", gi, err, in)
	}
	in2 := Intent{Key: "create/tok-2", Kind: IntentCreateENI, ClientToken: "tok-2", VSwitchID: "vsw-2"}
	if err := s.PutIntent(in2); err != nil {
		t.Fatal(err)
	}
	ins, err := s.ListIntents()
	if err != nil || !reflect.DeepEqual(ins, []Intent{in, in2}) {
		t.Fatalf("ListIntents = %+v, %v", ins, err)
	}
	if err := s.DeleteIntent(in.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetIntent(in.Key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetIntent after delete: %v", err)
	}
}

// TestSnapshot: attachments and intents come sorted by key, as copies,
// and from one moment: a transaction that swaps an intent for an
// attachment is never seen half done, however the reads interleave.
func TestSnapshot(t *testing.T) {
	s, _ := newStore(t)
	for _, n := range []string{"b", "a"} {
		if err := s.Put(sampleAttachment("ns", n)); err != nil {
			t.Fatal(err)
		}
	}
	in := sampleIntent("assign/eni-abc/1")
	if err := s.PutIntent(in); err != nil {
		t.Fatal(err)
	}
	atts, ins, err := s.Snapshot()
	if err != nil || len(atts) != 2 || atts[0].Key() != "ns/a" || atts[1].Key() != "ns/b" || !reflect.DeepEqual(ins, []Intent{in}) {
		t.Fatalf("Snapshot = %v, %v, %v", atts, ins, err)
	}
	atts[0].Resources[0].IPv4 = "changed"
	if again, _ := s.Get("ns", "a"); again.Resources[0].IPv4 == "changed" {
		t.Fatal("store changed through a returned attachment")
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			_ = s.Update(func(tx *Tx) error {
				if i%2 == 0 {
					_ = tx.DeleteIntent(in.Key)
					return tx.Put(sampleAttachment("ns", "swap"))
				}
				_ = tx.Delete("ns", "swap")
				return tx.PutIntent(in)
			})
		}
	}()
	for {
		select {
		case <-done:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Snapshot(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Snapshot of a closed store: %v", err)
			}
			return
		default:
		}
		atts, ins, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if len(atts)+len(ins) != 3 {
			t.Fatalf("half a transaction: %d attachments, %d intents", len(atts), len(ins))
		}
	}
}

func TestValidation(t *testing.T) {
	s, _ := newStore(t)
	bad := map[string]Attachment{
		"empty name":      {PodNamespace: "ns", IPType: IPTypeVPCIP},
		"slash in name":   {PodNamespace: "ns", PodName: "a/b", IPType: IPTypeVPCIP},
		"unknown IPType":  {PodNamespace: "ns", PodName: "a", IPType: "Bogus"},
		"unknown res":     {PodNamespace: "ns", PodName: "a", IPType: IPTypeVPCIP, Resources: []Resource{{Type: "nic", ID: "x"}}},
		"empty res ID":    {PodNamespace: "ns", PodName: "a", IPType: IPTypeVPCIP, Resources: []Resource{{Type: ResourceVeth}}},
		"invalid NetConf": {PodNamespace: "ns", PodName: "a", IPType: IPTypeVPCIP, NetConf: json.RawMessage("{")},
	}
	for name, a := range bad {
		if err := s.Put(a); err == nil {
			t.Errorf("%s: Put accepted %+v", name, a)
		}
	}
	if err := s.PutIntent(Intent{Key: "k"}); err == nil {
		t.Error("PutIntent accepted an intent without kind")
	}
	if err := s.PutPod(PodInfo{Namespace: "ns"}); err == nil {
		t.Error("PutPod accepted a pod without name")
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Errorf("rejected records were stored: %+v", list)
	}
}

func TestUpdateAtomic(t *testing.T) {
	s, path := newStore(t)
	a1 := sampleAttachment("ns", "a1")
	in := sampleIntent("release/a1")
	if err := s.Update(func(tx *Tx) error {
		if err := tx.Put(a1); err != nil {
			return err
		}
		return tx.PutIntent(in)
	}); err != nil {
		t.Fatal(err)
	}

	boom := errors.New("boom")
	var leaked *Tx
	err := s.Update(func(tx *Tx) error {
		leaked = tx
		if err := tx.Delete("ns", "a1"); err != nil {
			return err
		}
		if err := tx.DeleteIntent(in.Key); err != nil {
			return err
		}
		if err := tx.Put(sampleAttachment("ns", "a2")); err != nil {
			return err
		}
		// The transaction sees its own writes.
		if _, err := tx.Get("ns", "a1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("tx.Get of a record deleted in tx: %v", err)
		}
		if got, err := tx.Get("ns", "a2"); err != nil || got.PodName != "a2" {
			t.Errorf("tx.Get of a record put in tx: %+v, %v", got, err)
		}
		if l, _ := tx.List(); len(l) != 1 || l[0].PodName != "a2" {
			t.Errorf("tx.List = %+v", l)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	if err := leaked.Put(sampleAttachment("ns", "late")); !errors.Is(err, ErrTxDone) {
		t.Errorf("Tx used after Update: err = %v, want ErrTxDone", err)
	}
	check := func(s *Store, when string) {
		t.Helper()
		if _, err := s.Get("ns", "a1"); err != nil {
			t.Errorf("%s: a1 lost by a rolled-back Update: %v", when, err)
		}
		if _, err := s.GetIntent(in.Key); err != nil {
			t.Errorf("%s: intent lost by a rolled-back Update: %v", when, err)
		}
		for _, n := range []string{"a2", "late"} {
			if _, err := s.Get("ns", n); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: %s visible after a rolled-back Update: %v", when, n, err)
			}
		}
	}
	check(s, "before reopen")

	// A panicking function rolls back too and leaves the store usable.
	func() {
		defer func() { _ = recover() }()
		_ = s.Update(func(tx *Tx) error {
			_ = tx.Delete("ns", "a1")
			panic("oops")
		})
	}()
	check(s, "after panic")

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, Options{NoSync: true})
	check(s, "after reopen")

	// The committed version deletes both together.
	if err := s.Update(func(tx *Tx) error {
		if err := tx.Delete("ns", "a1"); err != nil {
			return err
		}
		return tx.DeleteIntent(in.Key)
	}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s = openT(t, path, Options{NoSync: true})
	if _, err := s.Get("ns", "a1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a1 after committed delete + reopen: %v", err)
	}
	if ins, _ := s.ListIntents(); len(ins) != 0 {
		t.Errorf("intents after committed delete + reopen: %+v", ins)
	}
}

func TestRestartPersistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s := openT(t, path, Options{}) // with fsync
	for i := range 5 {
		a := sampleAttachment("ns", fmt.Sprintf("pod-%d", i))
		a.CreatedAt = time.Now() // monotonic reading + local zone: must read back the same from memory and disk
		if err := s.Put(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutPod(samplePod("ns", "gone")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent(sampleIntent("create/1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("ns", "pod-3"); err != nil {
		t.Fatal(err)
	}
	atts, _ := s.List()
	pods, _ := s.ListPods()
	ins, _ := s.ListIntents()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.List(); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
	if err := s.Put(sampleAttachment("ns", "x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v, want ErrClosed", err)
	}

	s2 := openT(t, path, Options{})
	if w := s2.Warnings(); len(w) != 0 {
		t.Errorf("unexpected warnings: %v", w)
	}
	atts2, _ := s2.List()
	pods2, _ := s2.ListPods()
	ins2, _ := s2.ListIntents()
	if len(atts2) != 4 || !reflect.DeepEqual(atts, atts2) {
		t.Errorf("attachments after reopen differ from the mirror before:\n%+v\n%+v", atts2, atts)
	}
	if !reflect.DeepEqual(pods, pods2) || !reflect.DeepEqual(ins, ins2) {
		t.Errorf("pods/intents after reopen differ: %+v %+v", pods2, ins2)
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "lib", "cni", "terway")
	path := filepath.Join(dir, "ResRelation.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings on a new file: %v", w)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700, filepath.Dir(dir): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %#o, want %#o", p, fi.Mode().Perm(), want)
		}
	}
	_ = s.Close()

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, Options{NoSync: true})
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("existing 0644 file left at %#o", fi.Mode().Perm())
	}
	w := s.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "0644") || !strings.Contains(w[0], "0600") || !strings.Contains(w[0], path) {
		t.Errorf("warnings = %q, want one naming the path, 0644 and 0600", w)
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s := openT(t, path, Options{NoSync: true})
	type result struct {
		s   *Store
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		s2, err := Open(path, Options{NoSync: true, Timeout: 100 * time.Millisecond})
		done <- result{s2, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("second Open of a held file still waiting after 5s") // the Cleanup's Close releases it
	}
	elapsed, err := time.Since(start), r.err
	if err == nil {
		_ = r.s.Close()
		t.Fatal("second Open of a held file succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v; want ErrLocked naming %s", err, path)
	}
	if elapsed > 2*time.Second {
		t.Errorf("second Open took %v with a 100ms timeout", elapsed)
	}
	t.Logf("second Open: %v after %v", err, elapsed)
	_ = s.Close()
	s3, err := Open(path, Options{NoSync: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	_ = s3.Close()
}

func TestConcurrency(t *testing.T) {
	s, path := newStore(t)
	const workers, rounds = 16, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				name := fmt.Sprintf("w%d-%d", w, i%10)
				switch i % 4 {
				case 0, 1:
					if err := s.Put(sampleAttachment("ns", name)); err != nil {
						t.Error(err)
					}
				case 2:
					if err := s.Delete("ns", name); err != nil {
						t.Error(err)
					}
				case 3:
					if err := s.Update(func(tx *Tx) error {
						if err := tx.PutIntent(sampleIntent(name)); err != nil {
							return err
						}
						return tx.Put(sampleAttachment("shared", fmt.Sprint(i%5)))
					}); err != nil {
						t.Error(err)
					}
				}
				if _, err := s.List(); err != nil {
					t.Error(err)
				}
				_, _ = s.Get("shared", "0")
			}
		})
	}
	wg.Wait()

	// Each worker is sequential on its own names: replay its operations.
	want := map[string]bool{}
	for w := range workers {
		for i := range rounds {
			switch k := fmt.Sprintf("ns/w%d-%d", w, i%10); i % 4 {
			case 0, 1:
				want[k] = true
			case 2:
				want[k] = false
			}
		}
	}
	list, _ := s.List()
	got := map[string]bool{}
	for _, a := range list {
		if a.PodNamespace == "ns" {
			got[a.Key()] = true
		}
	}
	for k, exists := range want {
		if got[k] != exists {
			t.Errorf("%s: exists=%v, want %v", k, got[k], exists)
		}
	}
	_ = s.Close()
	s2 := openT(t, path, Options{NoSync: true})
	list2, _ := s2.List()
	if !reflect.DeepEqual(list, list2) {
		t.Errorf("disk after concurrent writes differs from the mirror: %d vs %d records", len(list2), len(list))
	}
}
