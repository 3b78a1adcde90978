package testnetns

import (
	"strings"
	"testing"
)

func TestReduceKeepsStableFields(t *testing.T) {
	link := "2: eth0: <BROADCAST,UP> mtu 1500 qdisc fq state UP mode DEFAULT\n"
	if got := reduce("link", []byte(link)); got != "2: eth0:\n" {
		t.Fatalf("link reduced to %q", got)
	}
	addr := "2: eth0    inet 10.0.0.2/24 brd 10.0.0.255 scope global dynamic eth0\\       valid_lft 3000sec\n"
	if got := reduce("addr", []byte(addr)); got != "2: eth0 inet 10.0.0.2/24\n" {
		t.Fatalf("addr reduced to %q", got)
	}
	if got := reduce("rule", []byte("0: from all lookup local\n")); got != "0: from all lookup local\n" {
		t.Fatalf("rules must be kept whole, got %q", got)
	}
}

func TestGuardRootReportsTestFailureAndSnapshots(t *testing.T) {
	if _, err := RootSnapshot(); err != nil {
		t.Skipf("no ip command here, GuardRoot falls back to running the tests: %v", err)
	}
	if code := GuardRoot("unit", func() int { return 0 }); code != 0 {
		t.Fatalf("unchanged root namespace: code %d", code)
	}
	if code := GuardRoot("unit", func() int { return 3 }); code != 3 {
		t.Fatalf("a failing run must keep its code, got %d", code)
	}
	s, _ := RootSnapshot()
	if !strings.Contains(s, "# ip -o link show") || !strings.Contains(s, "lo") {
		t.Fatalf("snapshot lacks the link listing: %q", s)
	}
}
