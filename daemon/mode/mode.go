// Package mode names the daemon's modes (terwayd --daemon-mode, Terway's
// spelling): the one definition that the daemon, its command and the lab,
// bench and scenarios (which deploy, drive or judge a daemon in a mode)
// share. It imports nothing, so any package may use it without a cycle.
package mode

import (
	"fmt"
	"strings"
)

// Mode is how the daemon gives pods their addresses.
type Mode string

// The modes, with Terway's names.
const (
	// ENIMultiIP: a secondary IP of a shared ENI per pod.
	ENIMultiIP Mode = "ENIMultiIP"
	// ENIOnly: a whole ENI per pod (exclusive ENI).
	ENIOnly Mode = "ENIOnly"
	// VPC: an address of the node's podCIDR, routed by the VPC.
	VPC Mode = "VPC"
	// Default is the mode when none is given (terwayd's --daemon-mode
	// default, as Terway's).
	Default = ENIMultiIP
)

// All returns the modes in their documented order.
func All() []Mode { return []Mode{ENIMultiIP, ENIOnly, VPC} }

// Valid reports whether m is one of the modes (names match exactly).
func (m Mode) Valid() bool {
	switch m {
	case ENIMultiIP, ENIOnly, VPC:
		return true
	}
	return false
}

// String returns the mode's name.
func (m Mode) String() string { return string(m) }

// Parse returns the mode named s, or an error naming the modes.
func Parse(s string) (Mode, error) {
	if m := Mode(s); m.Valid() {
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (%s)", s, list())
}

// list is the modes' names for messages: "ENIMultiIP, ENIOnly, VPC".
func list() string {
	names := make([]string, 0, 3)
	for _, m := range All() {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ")
}
