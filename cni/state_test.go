package cni

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terway-sim/terway/cni/datapath"
)

func TestStateStore(t *testing.T) {
	t.Parallel()
	s := stateStore{dir: filepath.Join(t.TempDir(), "state")}
	a := &attachment{ContainerID: "abc", IfName: "eth0", Pod: PodID{Namespace: "ns", Name: "p"}, IPType: "TypeENIMultiIP",
		Spec: &datapath.Spec{Kind: datapath.PolicyRoute, IfName: "eth0", HostVeth: "cali0"}}
	if _, err := s.load("abc", "eth0"); !errors.Is(err, errNoState) {
		t.Fatalf("load before save: %v", err)
	}
	if err := s.save(a); err != nil {
		t.Fatal(err)
	}
	got, err := s.load("abc", "eth0")
	if err != nil || got.Pod != a.Pod || got.Spec.HostVeth != "cali0" || got.Version != stateVersion {
		t.Fatalf("load: %+v %v", got, err)
	}
	// "a-b"+"c" and "a"+"b-c" share a file name: the content decides.
	if _, err := s.load("abc-eth0", "x"); !errors.Is(err, errNoState) {
		t.Errorf("load of a never-saved attachment: %v", err)
	}
	clash := &attachment{ContainerID: "a-b", IfName: "c", Spec: a.Spec}
	if err := s.save(clash); err != nil {
		t.Fatal(err)
	}
	if _, err := s.load("a", "b-c"); !errors.Is(err, errNoState) {
		t.Errorf("load of a clashing name returned another attachment: %v", err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "broken.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, tempPrefix+"old"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	atts, errs := s.list()
	if len(atts) != 2 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "broken.json") {
		t.Errorf("list: %d attachments, errors %v", len(atts), errs)
	}
	old := time.Now().Add(-2 * time.Hour)
	_ = os.Chtimes(filepath.Join(s.dir, tempPrefix+"old"), old, old)
	s.removeStaleTemps(time.Hour)
	if _, err := os.Stat(filepath.Join(s.dir, tempPrefix+"old")); !os.IsNotExist(err) {
		t.Errorf("stale temp file kept: %v", err)
	}
	if err := s.remove("abc", "eth0"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("abc", "eth0"); err != nil {
		t.Errorf("second remove: %v", err)
	}
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Errorf("temp file %s left", e.Name())
		}
	}
	if err := os.WriteFile(s.path("v", "eth0"), []byte(`{"version":99,"containerID":"v","ifName":"eth0","spec":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.load("v", "eth0"); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		t.Errorf("future schema: %v", err)
	}
}
