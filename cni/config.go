package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// Defaults of the network configuration.
const (
	// DefaultSocketPath is terwayd's socket, Terway's path.
	DefaultSocketPath = "/var/run/eni/eni.socket"
	// DefaultStateDir holds one state file per attachment and the locks.
	DefaultStateDir = "/var/lib/cni/terway"
	// DefaultMTU is the pod interface's MTU when the config sets none.
	DefaultMTU = 1500
	// DefaultVethPrefix starts the host-side veth names, Terway's "cali".
	DefaultVethPrefix = "cali"
)

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// VirtualType is the conf key eniip_virtual_type: how an ENIMultiIP pod
// is wired.
type VirtualType string

// The values of eniip_virtual_type (matched case-insensitively).
const (
	// VirtualVeth is the veth policy-routing datapath (the default).
	VirtualVeth VirtualType = "Veth"
	// VirtualIPVlan asks for ipvlan L2 on the ENI (datapath.IPVlan). On
	// a kernel without ipvlan such pods fall back to VirtualVeth with a
	// pod event.
	VirtualIPVlan VirtualType = "IPVlan"
	// VirtualDatapathV2 is Terway's Cilium eBPF datapath; not built here,
	// so it falls back to VirtualVeth with a pod event too.
	VirtualDatapathV2 VirtualType = "datapathv2"
)

// Config is the plugin's network configuration (stdin): the standard CNI
// keys, the Terway keys it honours, and its own.
type Config struct {
	// Net holds the standard keys. It is a named field, not embedded:
	// PluginConf's MarshalJSON would be promoted and drop every other key.
	Net types.PluginConf `json:"-"`

	// RuntimeConfig and Args are accepted as the runtime sends them; the
	// plugin takes what it needs from the daemon instead.
	RuntimeConfig json.RawMessage `json:"runtimeConfig,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`

	// Terway's keys.
	VirtualType     VirtualType `json:"eniip_virtual_type,omitempty"`
	HostStackCIDRs  []string    `json:"host_stack_cidrs,omitempty"`
	DisableHostPeer bool        `json:"disable_host_peer,omitempty"`
	MTU             int         `json:"mtu,omitempty"`
	VethPrefix      string      `json:"veth_prefix,omitempty"`
	Debug           bool        `json:"debug,omitempty"`

	// Ours.
	SocketPath string `json:"socket_path,omitempty"`
	StateDir   string `json:"state_dir,omitempty"`
	LogFile    string `json:"log_file,omitempty"`

	// HostStack is HostStackCIDRs parsed.
	HostStack []netip.Prefix `json:"-"`
	// Ignored lists the Terway keys present but not implemented, for the
	// log.
	Ignored []string `json:"-"`
}

// standardKeys are the CNI spec's plugin configuration keys, plus the
// ones libcni injects for GC.
var standardKeys = []string{"cniVersion", "name", "type", "capabilities", "runtimeConfig", "args", "prevResult",
	"ipam", "dns", "cni.dev/valid-attachments", "cni.dev/attachments"}

// terwayKeys and ownKeys are decoded into Config.
var (
	terwayKeys = []string{"eniip_virtual_type", "host_stack_cidrs", "disable_host_peer", "mtu", "veth_prefix", "debug"}
	ownKeys    = []string{"socket_path", "state_dir", "log_file"}
)

// ignoredKeys are Terway's keys this plugin accepts and does not
// implement: a Terway conf must work unchanged, so they are logged, never
// fatal.
var ignoredKeys = []string{"vlan_strip_type", "ip_stack", "bandwidth_mode", "enable_network_priority",
	"symmetric_routing_config", "network_policy_provider", "cilium_args", "auto_mtu", "trunk_on", "enable_ebpf"}

// vethPrefixRE keeps host veth names valid: VethName appends 11 hex
// digits and a link name has at most 15 characters.
var vethPrefixRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,4}$`)

// ParseConfig decodes and validates a network configuration. Its errors
// are *types.Error with the CNI code: 6 for JSON that does not decode, 1
// for an unsupported cniVersion, 2 for a key the plugin does not know
// (naming the key and its value), 7 for an invalid value.
func ParseConfig(data []byte) (*Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("decode network config: %v", err), "")
	}
	if raw == nil {
		return nil, types.NewError(types.ErrDecodingFailure, "decode network config: not a JSON object", "")
	}
	var ignored []string
	for _, k := range sortedKeys(raw) {
		switch {
		case slices.Contains(standardKeys, k), slices.Contains(terwayKeys, k), slices.Contains(ownKeys, k):
		case slices.Contains(ignoredKeys, k):
			ignored = append(ignored, k)
		case strings.HasPrefix(k, "cni.dev/"): // reserved for the runtime
		default:
			return nil, types.NewError(types.ErrUnsupportedField,
				fmt.Sprintf("unsupported field %q = %s in network config", k, truncate(string(raw[k]), 200)), "")
		}
	}
	c := &Config{}
	if err := json.Unmarshal(data, &c.Net); err != nil {
		return nil, invalidConfig("decode network config: %v", err)
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, invalidConfig("decode network config: %v", err)
	}
	c.Ignored = ignored
	if !slices.Contains(SupportedVersions, c.Net.CNIVersion) {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions",
			fmt.Sprintf("config is %q, plugin supports %q", c.Net.CNIVersion, SupportedVersions))
	}
	if c.Net.Name == "" {
		return nil, invalidConfig("network config: missing name")
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := version.ParsePrevResult(&c.Net); err != nil {
		return nil, invalidConfig("network config: prevResult: %v", err)
	}
	return c, nil
}

// validate checks the values and fills in the defaults.
func (c *Config) validate() error {
	switch strings.ToLower(string(c.VirtualType)) {
	case "", "veth":
		c.VirtualType = VirtualVeth
	case "ipvlan":
		c.VirtualType = VirtualIPVlan
	case "datapathv2":
		c.VirtualType = VirtualDatapathV2
	default:
		return invalidConfig("eniip_virtual_type %q: want Veth, IPVlan or datapathv2", c.VirtualType)
	}
	for _, s := range c.HostStackCIDRs {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return invalidConfig("host_stack_cidrs: %q is not a CIDR: %v", s, err)
		}
		c.HostStack = append(c.HostStack, p.Masked())
	}
	switch {
	case c.MTU == 0:
		c.MTU = DefaultMTU
	case c.MTU < 1280 || c.MTU > 65535:
		// 1280: the IPv6 minimum, which the datapath holds every pod to.
		return invalidConfig("mtu %d: want 1280..65535", c.MTU)
	}
	if c.VethPrefix == "" {
		c.VethPrefix = DefaultVethPrefix
	} else if !vethPrefixRE.MatchString(c.VethPrefix) {
		return invalidConfig("veth_prefix %q: want 1 to 4 of [a-zA-Z0-9_.-] (link names are at most 15 characters)", c.VethPrefix)
	} else if strings.HasPrefix(c.VethPrefix, "tz") {
		// Retired veths are named datapath.ReapPrefix+hex; a pod's must
		// never look like one.
		return invalidConfig("veth_prefix %q: prefixes starting with %q are reserved for retired veths", c.VethPrefix, "tz")
	}
	if c.SocketPath == "" {
		c.SocketPath = DefaultSocketPath
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	for key, p := range map[string]string{"socket_path": c.SocketPath, "state_dir": c.StateDir, "log_file": c.LogFile} {
		if p != "" && !filepath.IsAbs(p) {
			return invalidConfig("%s %q: want an absolute path", key, p)
		}
	}
	return nil
}

func invalidConfig(format string, args ...any) error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(format, args...), "")
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
