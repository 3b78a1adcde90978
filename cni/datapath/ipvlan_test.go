package datapath

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/terway-sim/terway/internal/testnetns"
)

// kernelHasIPVlan asks iproute2, independently of the code under test,
// whether an ipvlan link can be created in namespace n.
func kernelHasIPVlan(t *testing.T, n *testnetns.NS) bool {
	t.Helper()
	ip := func(args ...string) ([]byte, error) {
		return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "ip"}, args...)...).CombinedOutput()
	}
	if out, err := ip("link", "add", "dptprb0", "type", "veth", "peer", "name", "dptprb1"); err != nil {
		t.Fatalf("oracle: add veth: %v: %s", err, out)
	}
	defer func() { _, _ = ip("link", "del", "dptprb0") }()
	out, err := ip("link", "add", "link", "dptprb0", "name", "dptprb2", "type", "ipvlan", "mode", "l2")
	if err == nil {
		return true
	}
	msg := strings.ToLower(string(out))
	if strings.Contains(msg, "unknown device type") || strings.Contains(msg, "not supported") {
		t.Logf("oracle: this kernel lacks ipvlan: %s", strings.TrimSpace(string(out)))
		return false
	}
	t.Fatalf("oracle: ip link add type ipvlan failed unclearly: %v: %s", err, out)
	return false
}

func TestProbeIPVlan(t *testing.T) {
	pod := nsWithoutDAD(t)
	ph := testnetns.Handle(t, pod.Path())
	before := dump(t, ph)
	has := kernelHasIPVlan(t, pod)
	t.Logf("kernel has ipvlan: %v", has) // make test-kernel looks for true
	err := ProbeIPVlan(pod.Path())
	switch {
	case has && err != nil:
		t.Errorf("ProbeIPVlan = %v on a kernel with ipvlan", err)
	case !has && !errors.Is(err, ErrIPVlanUnsupported):
		t.Errorf("ProbeIPVlan = %v on a kernel without ipvlan, want ErrIPVlanUnsupported", err)
	}
	requireSame(t, "pod after the probe", before, dump(t, ph))

	err = ProbeIPVlan(t.TempDir() + "/no-such-netns")
	if err == nil || errors.Is(err, ErrIPVlanUnsupported) {
		t.Errorf("ProbeIPVlan of a missing netns = %v, want another error", err)
	}
}
