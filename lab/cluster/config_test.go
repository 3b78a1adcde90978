package cluster

import (
	"strings"
	"testing"
)

func TestValidateIPStack(t *testing.T) {
	for in, want := range map[string]string{"": "ipv4", "ipv4": "ipv4", "dual": "dual", "ipv6": "error"} {
		c := Config{IPStack: in}
		got := "error"
		if err := c.Validate(); err == nil {
			got = c.IPStack
		} else if !strings.Contains(err.Error(), "want ipv4 or dual") {
			t.Errorf("ip stack %q: %v", in, err)
		}
		if got != want {
			t.Errorf("ip stack %q: got %s, want %s", in, got, want)
		}
	}
}
