package daemon

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terway-sim/terway/daemon/store"
	"github.com/terway-sim/terway/rpc"
)

// TestContainerIDRefused: AllocIP refuses an empty or absurd container ID
// with InvalidArgument and stores nothing; ReleaseIP and GetIPInfo refuse
// an absurd one and still accept none at all. A runtime's 64 hex digits
// and the short IDs of tests pass.
func TestContainerIDRefused(t *testing.T) {
	l := newLab(t)
	l.pod("default", "web", nil)
	d, c, _ := l.daemon(nil)
	bad := map[string]string{
		"empty":          "",
		"1 MB":           strings.Repeat("a", 1<<20),
		"129 characters": strings.Repeat("a", MaxContainerIDLen+1),
		"a slash":        "../../etc",
		"a space":        "c 1",
		"a newline":      "c1\nforged log line",
		"leading dash":   "-c1",
		"non-ASCII":      "cé",
	}
	for name, id := range bad {
		t.Run("alloc "+name, func(t *testing.T) {
			_, err := alloc(t, c, "default", "web", id)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("AllocIP with container ID %.40q: %v, want InvalidArgument", id, err)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("error is %d bytes long; it must not echo the ID", len(err.Error()))
			}
			if _, err := d.store.Get("default", "web"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("something was stored for the refused AllocIP: %v", err)
			}
		})
		if id == "" {
			continue
		}
		t.Run("release and info "+name, func(t *testing.T) {
			_, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "default", K8SPodName: "web", K8SPodInfraContainerId: id})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("ReleaseIP: %v, want InvalidArgument", err)
			}
			_, err = c.GetIPInfo(ctxT(t), &rpc.GetInfoRequest{K8SPodNamespace: "default", K8SPodName: "web", K8SPodInfraContainerId: id})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("GetIPInfo: %v, want InvalidArgument", err)
			}
		})
	}
	good := strings.Repeat("0123456789abcdef", 4) // containerd's 64 hex digits
	if _, err := alloc(t, c, "default", "web", good); err != nil {
		t.Fatalf("AllocIP with a 64-hex container ID: %v", err)
	}
	if r, err := c.GetIPInfo(ctxT(t), &rpc.GetInfoRequest{K8SPodNamespace: "default", K8SPodName: "web"}); err != nil || !r.Success {
		t.Fatalf("GetIPInfo without a container ID: %v %v", r, err)
	}
	if _, err := c.ReleaseIP(ctxT(t), &rpc.ReleaseIPRequest{K8SPodNamespace: "default", K8SPodName: "web"}); err != nil {
		t.Fatalf("ReleaseIP without a container ID: %v", err)
	}
}

func TestCheckContainerID(t *testing.T) {
	for _, id := range []string{"c1", "p0-c", "cid-x", "c-web-1712345678901234567", "abc_DEF.1",
		strings.Repeat("f", 64), strings.Repeat("a", MaxContainerIDLen)} {
		if err := checkContainerID(id, true); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
	if err := checkContainerID("", false); err != nil {
		t.Errorf("empty ID where none is required: %v", err)
	}
	for _, id := range []string{"", "_c", ".c", "c/d", "c\x00", "c\td", strings.Repeat("a", MaxContainerIDLen+1)} {
		if err := checkContainerID(id, true); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%q: %v, want InvalidArgument", id, err)
		}
	}
}
