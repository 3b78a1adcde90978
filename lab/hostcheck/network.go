package hostcheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/terway-sim/terway/internal/nlsafe"
)

// Network is the root network namespace as netlink dumps it, each part
// keyed by what identifies an object to the kernel so that a change shows
// as one item with its before and after.
type Network struct {
	// Links by name.
	Links map[string]string `json:"links"`
	// Addresses by "device prefix".
	Addresses map[string]string `json:"addresses"`
	// Rules by "family priority".
	Rules map[string]string `json:"rules"`
	// Routes by "family table type destination dev metric".
	Routes map[string]string `json:"routes"`
	// Neighbours are the permanent entries by "device address".
	Neighbours map[string]string `json:"neighbours"`
	// DynamicNeighbours are the others (reachable, stale, …) by "device
	// address lladdr MAC"; their state is not kept.
	DynamicNeighbours map[string]string `json:"dynamicNeighbours"`
}

// take dumps the namespace of the calling thread.
func (n *Network) take() error {
	h, err := nlsafe.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	names := linkNames(links)
	n.Links = describeLinks(links, names)
	for _, part := range []func(*nlsafe.Handle, map[int]string) error{
		n.takeAddresses, n.takeRules, n.takeRoutes, n.takeNeighbours,
	} {
		if err := part(h, names); err != nil {
			return err
		}
	}
	return nil
}

func linkNames(links []netlink.Link) map[int]string {
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	return names
}

// linkName names an interface index; one that vanished between two
// dumps keeps its number.
func linkName(names map[int]string, index int) string {
	if name, ok := names[index]; ok {
		return name
	}
	return fmt.Sprintf("if%d", index)
}

// grouped collects values under keys that several objects may share
// (rules at one priority); each key's values are joined in sorted order.
type grouped map[string][]string

func (g grouped) add(key, value string) { g[key] = append(g[key], value) }

func (g grouped) joined() map[string]string {
	out := make(map[string]string, len(g))
	for k, vs := range g {
		slices.Sort(vs)
		out[k] = strings.Join(vs, " | ")
	}
	return out
}

// words joins the non-empty parts with spaces.
func words(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " ")
}

// opt formats "name value" when the value is set.
func opt(name string, value any, set bool) string {
	if !set {
		return ""
	}
	return fmt.Sprintf("%s %v", name, value)
}
