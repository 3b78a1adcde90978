package profile

import (
	"strings"
	"testing"
)

// TestProfilesConsistencyWindow: the default profile follows Alibaba's
// documentation (CreateNetworkInterface is synchronous, issue 10 finding
// 5) and fakecloud's default; the slow profile keeps a window, so the
// daemon's handling of a lagging Describe stays measured.
func TestProfilesConsistencyWindow(t *testing.T) {
	d, s := Default(), slowProfile()
	if d.ConsistencyWindow != 0 {
		t.Errorf("default profile consistency window %v, want 0", d.ConsistencyWindow)
	}
	if src := d.Sources["consistencyWindow"]; !strings.Contains(src, "synchronous") || !strings.Contains(src, "58504") {
		t.Errorf("default profile does not cite the CreateNetworkInterface documentation: %q", src)
	}
	if s.ConsistencyWindow <= 0 || s.Sources["consistencyWindow"] == "" {
		t.Errorf("slow profile window %v (source %q), want a window with its source", s.ConsistencyWindow, s.Sources["consistencyWindow"])
	}
}
