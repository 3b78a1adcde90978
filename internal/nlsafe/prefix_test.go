package nlsafe

import (
	"net/netip"
	"testing"
)

func TestPrefixRoundTrip(t *testing.T) {
	for _, s := range []string{"192.168.0.253/24", "10.0.0.1/32", "fd00:192:168::5/64", "0.0.0.0/0"} {
		p := netip.MustParsePrefix(s)
		if got := Prefix(IPNet(p)); got != p {
			t.Errorf("%s came back as %s", p, got)
		}
	}
	if Prefix(nil).IsValid() {
		t.Error("nil came back valid")
	}
}
