package cni

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/terway-sim/terway/internal/nlsafe"
	"github.com/terway-sim/terway/internal/testnetns"
)

func randomTag(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// node is a test-made node namespace with a veth standing in for an ENI
// (the lab's hypervisor does the same): its node end carries the ENI's
// MAC, its peer stays beside it as the "fabric" end.
type node struct {
	ns      ns.NetNS
	nl      *nlsafe.Handle
	eniName string
	eniMAC  string
}

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{ns: testnetns.ForTest(t)}
	n.nl = testnetns.Handle(t, n.ns.Path())
	n.eniName, n.eniMAC = n.addENI(t)
	lo, err := n.nl.LinkByName("lo")
	if err == nil {
		_ = n.nl.LinkSetUp(lo)
	}
	return n
}

// addENI adds another ENI stand-in and returns its name and MAC.
func (n *node) addENI(t *testing.T) (string, string) {
	t.Helper()
	tag := randomTag(t)
	name := linkPrefix + "e" + tag
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: linkPrefix + "f" + tag}
	if err := n.nl.LinkAdd(veth); err != nil {
		t.Fatalf("add ENI stand-in %s: %v", name, err)
	}
	for _, l := range []string{veth.Name, veth.PeerName} {
		link, err := n.nl.LinkByName(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.nl.LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
	}
	link, err := n.nl.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return name, link.Attrs().HardwareAddr.String()
}

// state is the node namespace's configuration as comparable lines:
// links (name and kind), addresses, rules, routes (no kernel ones),
// permanent neighbours, qdiscs and tc filters.
func (n *node) state(t *testing.T) map[string]bool {
	t.Helper()
	return nsState(t, n.nl)
}

func nsState(t *testing.T, h *nlsafe.Handle) map[string]bool {
	t.Helper()
	s := map[string]bool{}
	links, err := h.LinkList()
	if err != nil {
		t.Fatalf("list links: %v", err)
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		s[fmt.Sprintf("link %s %s", a.Name, l.Type())] = true
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := h.AddrList(nil, fam)
		if err != nil {
			t.Fatalf("list addrs: %v", err)
		}
		for _, a := range addrs {
			if !a.IP.IsLinkLocalUnicast() {
				s[fmt.Sprintf("addr %s %s", names[a.LinkIndex], a.IPNet)] = true
			}
		}
		rules, err := h.RuleList(fam)
		if err != nil {
			t.Fatalf("list rules: %v", err)
		}
		for _, r := range rules {
			s[fmt.Sprintf("rule %d from %s to %s iif %q oif %q table %d", r.Priority, r.Src, r.Dst, r.IifName, r.OifName, r.Table)] = true
		}
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatalf("list routes: %v", err)
		}
		for _, r := range routes {
			if r.Protocol == unix.RTPROT_KERNEL || r.Table == unix.RT_TABLE_LOCAL || (r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast()) ||
				(r.Dst != nil && r.Dst.IP.IsMulticast()) {
				continue
			}
			s[fmt.Sprintf("route table %d %s via %s dev %s", r.Table, r.Dst, r.Gw, names[r.LinkIndex])] = true
		}
		neighs, err := h.NeighList(0, fam)
		if err != nil {
			t.Fatalf("list neighbours: %v", err)
		}
		for _, nb := range neighs {
			if nb.State&netlink.NUD_PERMANENT != 0 {
				s[fmt.Sprintf("neigh %s lladdr %s dev %s", nb.IP, nb.HardwareAddr, names[nb.LinkIndex])] = true
			}
		}
	}
	for _, l := range links {
		qdiscs, err := h.QdiscList(l)
		if err != nil {
			t.Fatalf("list qdiscs: %v", err)
		}
		parents := map[uint32]bool{netlink.HANDLE_ROOT: true, netlink.HANDLE_MIN_INGRESS: true, netlink.HANDLE_MIN_EGRESS: true}
		for _, q := range qdiscs {
			a := q.Attrs()
			if q.Type() == "noqueue" || q.Type() == "noop" {
				continue
			}
			s[fmt.Sprintf("qdisc %s %s handle %x parent %x", l.Attrs().Name, q.Type(), a.Handle, a.Parent)] = true
			parents[a.Handle] = true
		}
		for parent := range parents {
			filters, err := h.FilterList(l, parent)
			if err != nil {
				continue // no such parent on this link
			}
			for _, f := range filters {
				a := f.Attrs()
				s[fmt.Sprintf("filter %s %s parent %x prio %d", l.Attrs().Name, f.Type(), a.Parent, a.Priority)] = true
			}
		}
	}
	return s
}

// diff returns the lines of a not in b, sorted.
func diff(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// tlog sends the plugin's log to the test log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// env is one test's node, daemon and plugin settings.
type env struct {
	t        *testing.T
	node     *node
	daemon   *fakeDaemon
	stateDir string
	probe    func(string) error
	// recordedHostNS is the host netns state files must name: the test's
	// node namespace in-process, "" (the process's own) for the binary.
	recordedHostNS string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, node: newNode(t), daemon: startFakeDaemon(t), stateDir: filepath.Join(t.TempDir(), "state")}
	e.probe = func(string) error { return fmt.Errorf("test probe: %w", errTestNoIPVlan) }
	e.recordedHostNS = e.node.ns.Path()
	return e
}

var errTestNoIPVlan = errors.New("ipvlan forced missing by the test")

// conf is the network config of version v with extra keys appended.
func (e *env) conf(v string, extra string) []byte {
	return fmt.Appendf(nil, `{"cniVersion":%q,"name":"terway","type":"terway","veth_prefix":%q,"socket_path":%q,"state_dir":%q%s}`,
		v, linkPrefix, e.daemon.socket, e.stateDir, extra)
}

// withPrev adds prevResult to a config.
func withPrev(conf, prev []byte) []byte {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(conf, &m)
	m["prevResult"] = prev
	out, _ := json.Marshal(m)
	return out
}

// run invokes one verb in-process with a plugin of the test's settings
// and returns what it printed.
func (e *env) run(verb string, args *skel.CmdArgs) ([]byte, error) {
	var out bytes.Buffer
	p := newPlugin(&out, tlog{e.t})
	p.hostNetNS = e.node.ns.Path()
	p.probeIPVlan = e.probe
	f := p.funcs()
	fn := map[string]func(*skel.CmdArgs) error{"ADD": f.Add, "DEL": f.Del, "CHECK": f.Check, "GC": f.GC, "STATUS": f.Status}[verb]
	err := fn(args)
	return out.Bytes(), err
}

// pod is one pod interface of a test.
type pod struct {
	ns     ns.NetNS
	name   string
	cid    string
	ifName string
}

func (e *env) newPod(name string) *pod {
	return &pod{ns: testnetns.ForTest(e.t), name: name, cid: "cid-" + name + "-" + randomTag(e.t), ifName: "eth0"}
}

func (p *pod) args(conf []byte) *skel.CmdArgs {
	netnsPath := ""
	if p.ns != nil {
		netnsPath = p.ns.Path()
	}
	return &skel.CmdArgs{ContainerID: p.cid, Netns: netnsPath, IfName: p.ifName, Args: podArgs("default", p.name, p.cid),
		Path: "/nonexistent", StdinData: conf}
}

// add runs ADD and parses the result in the config's version.
func (e *env) add(p *pod, conf []byte) (types.Result, []byte) {
	e.t.Helper()
	out, err := e.run("ADD", p.args(conf))
	if err != nil {
		e.t.Fatalf("ADD %s: %v", p.name, err)
	}
	v, err := (&version.ConfigDecoder{}).Decode(conf)
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := version.NewResult(v, out)
	if err != nil {
		e.t.Fatalf("ADD %s: result %s does not parse as %s: %v", p.name, out, v, err)
	}
	if res.Version() != v {
		e.t.Fatalf("ADD %s: result version %s, want %s", p.name, res.Version(), v)
	}
	return res, out
}

func (e *env) del(p *pod, conf []byte, netnsPath string) {
	e.t.Helper()
	args := p.args(conf)
	args.Netns = netnsPath
	if _, err := e.run("DEL", args); err != nil {
		e.t.Fatalf("DEL %s (netns %q): %v", p.name, netnsPath, err)
	}
}

// resultIPs lists a result's addresses.
func resultIPs(t *testing.T, r types.Result) []string {
	t.Helper()
	c, err := current.NewResultFromResult(r)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, ip := range c.IPs {
		ips = append(ips, ip.Address.IP.String())
	}
	return ips
}

// podAddrs lists the IPv4 addresses on ifName in the pod's namespace.
func podAddrs(t *testing.T, p *pod) []string {
	t.Helper()
	h := testnetns.Handle(t, p.ns.Path())
	l, err := h.LinkByName(p.ifName)
	if err != nil {
		return nil
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		out = append(out, a.IP.String())
	}
	return out
}

// linkExists reports whether the namespace has a link named name.
func linkExists(t *testing.T, h *nlsafe.Handle, name string) bool {
	t.Helper()
	_, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return false
	}
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return true
}

// mentions returns the lines of s naming addr as a whole word.
func mentions(s map[string]bool, addr string) []string {
	var out []string
	for k := range s {
		for f := range strings.FieldsSeq(k) {
			if f == addr || strings.HasPrefix(f, addr+"/") {
				out = append(out, k)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
