// Package storetest makes, for tests outside daemon/store, stores in the
// states a daemon must survive at start.
package storetest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/terway-sim/terway/daemon/store"
)

// Damaged writes a store with 30 pod records at path and then 1 KiB of
// garbage at the start of the attachments bucket's root page, the damage
// bbolt used to panic on at open. It returns the damaged file's bytes, so
// a test can prove that nothing rewrote the file.
func Damaged(t testing.TB, path string) []byte {
	t.Helper()
	s, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		// Long netns paths push the bucket out of its inline page.
		a := store.Attachment{PodNamespace: "default", PodName: fmt.Sprintf("pod-%02d", i), PodUID: "uid", IfName: "eth0",
			IPType: store.IPTypeENIMultiIP, Netns: "/var/run/netns/cni-" + strings.Repeat("x", 300),
			Resources: []store.Resource{{Type: store.ResourceENIIP, ID: fmt.Sprintf("00:16:3e:00:00:01.192.168.0.%d", i+10),
				ENIID: "eni-1", ENIMAC: "00:16:3e:00:00:01", IPv4: fmt.Sprintf("192.168.0.%d", i+10)}}}
		if err := s.Put(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	page := attachmentsRoot(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1024 {
		data[page*os.Getpagesize()+i] = byte(i*7 + 13)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

// attachmentsRoot returns the page number of the attachments bucket's
// root, which must be a page of its own.
func attachmentsRoot(t testing.TB, path string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var page int
	_ = db.View(func(tx *bolt.Tx) error { page = int(tx.Bucket([]byte("attachments")).Root()); return nil })
	if page < 2 {
		t.Fatalf("attachments bucket is inline (root page %d)", page)
	}
	return page
}
