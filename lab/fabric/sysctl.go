package fabric

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/containernetworking/plugins/pkg/ns"
)

// writeSysctls sets /proc/sys entries inside the namespace at nsPath:
// /proc/sys/net belongs to the namespace of the thread that opens it.
func writeSysctls(nsPath string, kv map[string]string) error {
	n, err := ns.GetNS(nsPath)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	defer func() { _ = n.Close() }()
	return n.Do(func(ns.NetNS) error {
		for k, v := range kv {
			p := filepath.Join("/proc/sys", k)
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in %s: %w", k, v, nsPath, err)
			}
		}
		return nil
	})
}

// hostPrefix is a single-address prefix.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
