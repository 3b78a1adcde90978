package mode

import (
	"strings"
	"testing"
)

// The names are Terway's flag values, so they are spelled out here.
func TestParse(t *testing.T) {
	for _, s := range []string{"ENIMultiIP", "ENIOnly", "VPC"} {
		m, err := Parse(s)
		if err != nil || string(m) != s || !m.Valid() {
			t.Errorf("Parse(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "eniMultiIP", "VPCENI", "ENIMultiIP "} {
		if m, err := Parse(s); err == nil || m.Valid() {
			t.Errorf("Parse(%q) = %q, %v; want an error", s, m, err)
		} else if !strings.Contains(err.Error(), "ENIMultiIP, ENIOnly, VPC") {
			t.Errorf("Parse(%q) error %q does not name the modes", s, err)
		}
	}
	if Default != ENIMultiIP {
		t.Errorf("Default = %q, want Terway's ENIMultiIP", Default)
	}
}
