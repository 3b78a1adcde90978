package datapath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
)

// sysctl is one value under /proc/sys. The path is kept in parts because
// interface names may contain dots.
type sysctl struct {
	path []string
	want string
}

func (c sysctl) String() string { return strings.Join(c.path, ".") }

// conf is net.<proto>.conf.<dev>.<key> = want.
func conf(proto, dev, key, want string) sysctl {
	return sysctl{path: []string{"net", proto, "conf", dev, key}, want: want}
}

// sysctlSet is the sysctls one namespace needs. /proc/sys/net belongs to
// the namespace of the thread that opens the file, hence ns.Do.
type sysctlSet struct {
	n     ns.NetNS
	where string
	list  []sysctl
}

func (o sysctlSet) String() string { return "sysctls in " + o.where }

func (o sysctlSet) each(f func(c sysctl, file, have string) error) error {
	return o.n.Do(func(ns.NetNS) error {
		for _, c := range o.list {
			file := filepath.Join(append([]string{"/proc/sys"}, c.path...)...)
			b, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read sysctl %s in %s: %w", c, o.where, err)
			}
			if err := f(c, file, strings.TrimSpace(string(b))); err != nil {
				return err
			}
		}
		return nil
	})
}

func (o sysctlSet) ensure() error {
	return o.each(func(c sysctl, file, have string) error {
		if have == c.want {
			return nil
		}
		if err := os.WriteFile(file, []byte(c.want), 0o644); err != nil {
			return fmt.Errorf("set sysctl %s=%s in %s: %w", c, c.want, o.where, err)
		}
		return nil
	})
}

func (o sysctlSet) check() error {
	return o.each(func(c sysctl, _, have string) error {
		if have != c.want {
			return fmt.Errorf("sysctl %s in %s: %s, want %s", c, o.where, have, c.want)
		}
		return nil
	})
}

// hostSysctls is what the node needs to forward the pod's traffic:
// forwarding on, and no reverse-path filter (pod traffic leaves through
// the ENI but returns to the node through another interface, and the pod's
// address has no route back through the interface it arrived on in the
// ENI table). devs are the node links of this pod (host veth, ENI).
func (e *env) hostSysctls(devs ...string) sysctlSet {
	var list []sysctl
	for _, d := range append([]string{"all", "default"}, devs...) {
		list = append(list, conf("ipv4", d, "forwarding", "1"), conf("ipv4", d, "rp_filter", "0"))
	}
	if e.s.IPv6.IsValid() {
		// IPv6 forwards only with conf.all.forwarding; per device it
		// also stops accepting router advertisements.
		for _, d := range append([]string{"all", "default"}, devs...) {
			list = append(list, conf("ipv6", d, "forwarding", "1"))
		}
		for _, d := range devs {
			list = append(list, conf("ipv6", d, "disable_ipv6", "0"))
		}
	}
	return sysctlSet{n: e.hostNS, where: "host", list: list}
}

// podSysctls enables IPv6 in the pod (container runtimes often disable it)
// and stops the pod's interfaces from configuring themselves from router
// advertisements: the datapath owns their routes. Nothing for IPv4.
func (e *env) podSysctls(devs ...string) []object {
	if !e.s.IPv6.IsValid() {
		return nil
	}
	var list []sysctl
	for _, d := range append([]string{"all", "default", "lo"}, devs...) {
		list = append(list, conf("ipv6", d, "disable_ipv6", "0"))
	}
	for _, d := range devs {
		list = append(list, conf("ipv6", d, "accept_ra", "0"))
	}
	return []object{sysctlSet{n: e.podNS, where: "pod", list: list}}
}
