package chaos

import (
	"context"
	"net/netip"
	"time"

	"github.com/terway-sim/terway/fakecloud/admin"
)

// Cloud is what the engine needs of fakecloud's admin API: faults,
// settings, vSwitch drain and refill, and the world and call accounting
// it chooses targets from and proves faults with. *admin.Client is one.
type Cloud interface {
	AddFault(ctx context.Context, f admin.Fault) (string, error)
	RemoveFault(ctx context.Context, name string) error
	Faults(ctx context.Context) ([]admin.FaultStatus, error)
	Settings(ctx context.Context) (admin.Settings, error)
	// UpdateSettings replaces the settings partial names by their JSON
	// keys, each whole (a map too), so that writing back what was read
	// restores it exactly.
	UpdateSettings(ctx context.Context, partial map[string]any) (admin.Settings, error)
	// DrainVSwitch takes the vSwitch's free addresses away but leave.
	DrainVSwitch(ctx context.Context, id string, leave int) error
	// RefillVSwitch gives back what DrainVSwitch took.
	RefillVSwitch(ctx context.Context, id string) error
	World(ctx context.Context) (*admin.WorldView, error)
	Calls(ctx context.Context) ([]admin.CallStat, error)
}

var _ Cloud = (*admin.Client)(nil)

// budget is the throttle budget of action under s.
func budget(s admin.Settings, action string) int {
	if n, ok := s.Throttle[action]; ok {
		return n
	}
	return s.Throttle["*"]
}

// throttleCode is what a throttled call of action answers under s.
func throttleCode(s admin.Settings, action string) string {
	if c, ok := s.ThrottleCodes[action]; ok && c != "" {
		return c
	}
	if c := s.ThrottleCodes["*"]; c != "" {
		return c
	}
	return "Throttling.User"
}

// exhaustionCode is what a dry vSwitch answers under s.
func exhaustionCode(s admin.Settings) string {
	if s.ExhaustionCode != "" {
		return s.ExhaustionCode
	}
	return "InvalidVSwitchId.IpNotEnough"
}

// Lab is the lab supervisor's control of nodes and components.
type Lab interface {
	// StopNode powers a node's instance off: its kubelet, containerd and
	// pods are killed, its disks kept, its ENIs unplugged.
	StopNode(ctx context.Context, node string) error
	// StartNode powers it on again.
	StartNode(ctx context.Context, node string) error
	// ReleaseNode releases the node's instance and deletes its Node
	// object, as cloud-controller-manager would.
	ReleaseNode(ctx context.Context, node string) error
	// Kill kills component (ComponentTerwayd, ComponentContainerd,
	// ComponentKubelet or ComponentAPIServer with node "") with SIGKILL;
	// the supervisor starts it again after downtime (kubelet restarts
	// terwayd's container itself).
	Kill(ctx context.Context, component, node string, downtime time.Duration) error
}

// Operator is what an operator does from the console, out of band:
// through the ordinary ECS API with an AccessKey of the account.
type Operator interface {
	DetachENI(ctx context.Context, eniID, instanceID string) error
	// DeleteENI deletes an ENI, detaching it first if it is attached.
	DeleteENI(ctx context.Context, eniID string) error
	UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error
}

// Node is one node of the lab as the engine targets it.
type Node struct {
	Name       string `json:"name"`
	InstanceID string `json:"instanceId"`
}
