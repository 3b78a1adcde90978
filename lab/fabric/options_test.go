package fabric

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestNewFabricRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", "Upper", "has.dot", "toolong12", "1digit", "a/b"} {
		if _, err := NewFabric(FabricOptions{Name: name, NetNSDir: dir}); err == nil || !strings.Contains(err.Error(), "fabric name") {
			t.Errorf("name %q: %v, want a name error", name, err)
		}
		if err := Cleanup(name, dir); err == nil {
			t.Errorf("Cleanup(%q) accepted the name", name)
		}
	}
	a := netip.MustParseAddr("100.100.0.20")
	if _, err := NewFabric(FabricOptions{Name: "ok", NetNSDir: dir, MetadataAddr: a, APIAddr: a}); err == nil {
		t.Error("same metadata and API address accepted")
	}
	if _, err := NewFabric(FabricOptions{Name: "ok", NetNSDir: dir, APIAddr: netip.MustParseAddr("fd00::1")}); err == nil {
		t.Error("IPv6 API address accepted")
	}
}

// Interval sets get merged ranges with exclusive ends; a range reaching
// the last address has no end element (the kernel treats it as open).
func TestIntervalElements(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		in   []netip.Prefix
		want string
	}{
		{[]netip.Prefix{p("192.168.0.5/32")}, "192.168.0.5 end:192.168.0.6"},
		{[]netip.Prefix{p("192.168.0.6/32"), p("192.168.0.5/32")}, "192.168.0.5 end:192.168.0.7"},
		{[]netip.Prefix{p("172.20.1.0/24"), p("172.20.1.7/32"), p("192.168.0.1/32")}, "172.20.1.0 end:172.20.2.0 192.168.0.1 end:192.168.0.2"},
		{[]netip.Prefix{p("172.20.0.0/16"), p("172.20.3.0/24")}, "172.20.0.0 end:172.21.0.0"},
		{[]netip.Prefix{p("0.0.0.0/0"), p("192.168.0.1/32")}, "0.0.0.0"},
		{[]netip.Prefix{p("255.255.255.255/32")}, "255.255.255.255"},
		{[]netip.Prefix{p("fe80::/10"), p("::/128")}, ":: end:::1 fe80:: end:fec0::"},
	} {
		var got []string
		for _, e := range intervalElements(tc.in) {
			a, _ := netip.AddrFromSlice(e.Key)
			if e.IntervalEnd {
				got = append(got, "end:"+a.String())
			} else {
				got = append(got, a.String())
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%v: got %q, want %q", tc.in, strings.Join(got, " "), tc.want)
		}
		// Every input address is in the set, the address after each range
		// is not.
		els := intervalElements(tc.in)
		for _, pf := range tc.in {
			if !setHas(els, pf.Addr()) || !setHas(els, lastAddr(pf)) {
				t.Errorf("%v: %s not in the set", tc.in, pf)
			}
		}
	}
	if s := fmt.Sprint(lastAddr(p("10.0.0.0/8"))); s != "10.255.255.255" {
		t.Errorf("lastAddr = %s", s)
	}
}
