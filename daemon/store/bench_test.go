package store

import (
	"path/filepath"
	"testing"
)

// BenchmarkPutDeleteFsync is one Put and one Delete of an attachment, each
// its own fsync-ed commit: the store cost of one AllocIP + ReleaseIP.
func BenchmarkPutDeleteFsync(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "store.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	a := sampleAttachment("default", "web-0")
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Put(a); err != nil {
			b.Fatal(err)
		}
		if err := s.Delete(a.PodNamespace, a.PodName); err != nil {
			b.Fatal(err)
		}
	}
}
