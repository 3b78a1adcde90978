package daemon

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/rpc"
)

// TestAllocIPWhilePodBusy: an AllocIP for a pod with a call in flight
// is answered, over the socket, with what every plugin recognises —
// code Unavailable and "already processing" in the message, for
// Terway's plugin and ours before the detail — and the rpc.PodBusy
// detail naming the pod, which ours reads first. Once the pod's turn is
// free the same call succeeds.
func TestAllocIPWhilePodBusy(t *testing.T) {
	l := newLab(t)
	l.pod("default", "busy", nil)
	d, c, _ := l.daemon(nil)
	d.mu.Lock()
	d.pending["default/busy"] = true
	d.mu.Unlock()

	_, err := alloc(t, c, "default", "busy", "c1")
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "already processing") {
		t.Fatalf("AllocIP while busy: %v; want Unavailable with %q in the message", err, "already processing")
	}
	b, ok := rpc.PodBusyDetail(err)
	if !ok || b.GetPod() != "default/busy" {
		t.Fatalf("AllocIP while busy: detail %v, %v; want PodBusy for default/busy (details %v)", b, ok, st.Details())
	}

	d.mu.Lock()
	delete(d.pending, "default/busy")
	d.mu.Unlock()
	if _, err := alloc(t, c, "default", "busy", "c1"); err != nil {
		t.Fatalf("AllocIP once the pod's turn is free: %v", err)
	}
}
