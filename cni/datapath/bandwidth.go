package datapath

import (
	"errors"
	"fmt"
	"math"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Token bucket parameters, Terway's: burst = max(rate/HZ, MTU+1500) bytes,
// queue limit = 25 ms of traffic at the rate plus one burst.
const (
	// assumedHZ stands for the kernel's CONFIG_HZ, which user space cannot
	// read reliably (/proc/net/psched reports the high-resolution timer
	// instead); 250 is the common distribution default. A lower guess only
	// makes the burst bigger.
	assumedHZ = 250
	// tbfLatencyMS is how long a packet may wait in the bucket's queue.
	tbfLatencyMS = 25
)

// tbfFor is the root tbf qdisc limiting link's egress to rate bytes/s.
func tbfFor(link netlink.Link, rate uint64, mtu int) *netlink.Tbf {
	burst := max(rate/assumedHZ, uint64(mtu)+1500)
	burst = min(burst, math.MaxUint32)
	limit := min(rate*tbfLatencyMS/1000+burst, math.MaxUint32)
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{
			LinkIndex: link.Attrs().Index,
			Handle:    netlink.MakeHandle(1, 0),
			Parent:    netlink.HANDLE_ROOT,
		},
		Rate:   rate,
		Limit:  uint32(limit),
		Buffer: netlink.Xmittime(rate, uint32(burst)),
	}
}

// tbfObj is the root tbf of a link; rate 0 means none (a tbf left from an
// earlier limit is removed).
type tbfObj struct {
	h    *nlh
	link netlink.Link
	rate uint64
	mtu  int
}

func (o tbfObj) String() string { return "qdisc tbf on " + o.link.Attrs().Name }

// root returns the link's root tbf, if any.
func (o tbfObj) root() (*netlink.Tbf, error) {
	qs, err := o.h.QdiscList(o.link)
	if err != nil {
		return nil, failed(o, "list qdiscs for", err)
	}
	for _, q := range qs {
		if t, ok := q.(*netlink.Tbf); ok && q.Attrs().Parent == netlink.HANDLE_ROOT {
			return t, nil
		}
	}
	return nil, nil
}

func (o tbfObj) ensure() error {
	have, err := o.root()
	if err != nil {
		return err
	}
	if o.rate == 0 {
		if have != nil {
			if err := o.h.QdiscDel(have); err != nil && !gone(err) {
				return failed(o, "remove", err)
			}
		}
		return nil
	}
	want := tbfFor(o.link, o.rate, o.mtu)
	if have != nil && have.Rate == want.Rate && have.Limit == want.Limit {
		return nil
	}
	if err := o.h.QdiscReplace(want); err != nil {
		return failed(o, "set", err)
	}
	return nil
}

func (o tbfObj) check() error {
	if o.rate == 0 {
		return nil
	}
	have, err := o.root()
	switch {
	case err != nil:
		return err
	case have == nil:
		return broken(o, "missing")
	case have.Rate != o.rate:
		return broken(o, "rate %d B/s, want %d", have.Rate, o.rate)
	}
	return nil
}

// ingressShaper limits what arrives on dev (a pod's ENI, where the VPC
// delivers the pod's ingress without passing the node): an ingress qdisc
// on dev redirects every packet to an ifb device in the same namespace,
// whose root tbf sets the rate, as the CNI bandwidth plugin does.
type ingressShaper struct {
	h   *nlh
	dev netlink.Link
	ifb string
	// created records the ifb for rollback.
	created func(what string, fn func() error)
	rate    uint64
	mtu     int
}

// ifbName is the ifb of pod interface ifName.
func ifbName(ifName string) string {
	n := "ifb" + ifName
	if len(n) > 15 {
		n = n[:15]
	}
	return n
}

func (o ingressShaper) String() string {
	return fmt.Sprintf("ingress shaping of %s via %s", o.dev.Attrs().Name, o.ifb)
}

// ingressHandle is the ingress qdisc's handle, ffff:.
var ingressHandle = netlink.MakeHandle(0xffff, 0)

func (o ingressShaper) ensure() error {
	ifb, err := o.h.linkByName(o.ifb)
	if err != nil {
		return err
	}
	if o.rate == 0 {
		return o.remove(ifb)
	}
	if ifb == nil {
		if ifb, err = o.addIfb(); err != nil {
			return err
		}
	}
	for _, obj := range []object{
		linkObj{h: o.h, link: ifb, mtu: o.mtu},
		tbfObj{h: o.h, link: ifb, rate: o.rate, mtu: o.mtu},
	} {
		if err := obj.ensure(); err != nil {
			return err
		}
	}
	if err := o.ensureIngressQdisc(); err != nil {
		return err
	}
	return o.ensureRedirect(ifb)
}

func (o ingressShaper) addIfb() (netlink.Link, error) {
	err := o.h.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: o.ifb, MTU: o.mtu, TxQLen: 1000}})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, failed(o, "add ifb for", err)
	}
	ifb, err := o.h.linkByName(o.ifb)
	if err != nil {
		return nil, err
	}
	if ifb == nil {
		return nil, broken(o, "ifb %s vanished", o.ifb)
	}
	o.created("ifb "+o.ifb, func() error { return o.h.deleteLink(ifb) })
	return ifb, nil
}

// ingressQdisc returns dev's ingress qdisc, if any.
func (o ingressShaper) ingressQdisc() (netlink.Qdisc, error) {
	qs, err := o.h.QdiscList(o.dev)
	if err != nil {
		return nil, failed(o, "list qdiscs for", err)
	}
	for _, q := range qs {
		if _, ok := q.(*netlink.Ingress); ok {
			return q, nil
		}
	}
	return nil, nil
}

func (o ingressShaper) ensureIngressQdisc() error {
	q, err := o.ingressQdisc()
	if err != nil || q != nil {
		return err
	}
	err = o.h.QdiscAdd(&netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: o.dev.Attrs().Index, Handle: ingressHandle, Parent: netlink.HANDLE_INGRESS,
	}})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return failed(o, "add ingress qdisc for", err)
	}
	return nil
}

// redirect returns the u32 filter sending dev's ingress to ifb, if any.
func (o ingressShaper) redirect(ifb netlink.Link) (bool, error) {
	fs, err := o.h.FilterList(o.dev, ingressHandle)
	if err != nil {
		return false, failed(o, "list filters for", err)
	}
	for _, f := range fs {
		if u, ok := f.(*netlink.U32); ok && u.RedirIndex == ifb.Attrs().Index {
			return true, nil
		}
	}
	return false, nil
}

func (o ingressShaper) ensureRedirect(ifb netlink.Link) error {
	ok, err := o.redirect(ifb)
	if err != nil || ok {
		return err
	}
	// A u32 filter without a selector matches every packet; RedirIndex
	// adds `action mirred egress redirect dev <ifb>`.
	err = o.h.FilterAdd(&netlink.U32{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: o.dev.Attrs().Index,
			Parent:    ingressHandle,
			Priority:  1,
			Protocol:  unix.ETH_P_ALL,
		},
		RedirIndex: ifb.Attrs().Index,
	})
	if err != nil {
		return failed(o, "add redirect filter for", err)
	}
	return nil
}

// remove drops the ingress qdisc (and with it the filter) and the ifb.
func (o ingressShaper) remove(ifb netlink.Link) error {
	q, err := o.ingressQdisc()
	if err != nil {
		return err
	}
	if q != nil {
		if err := o.h.QdiscDel(q); err != nil && !gone(err) {
			return failed(o, "remove ingress qdisc of", err)
		}
	}
	if ifb != nil {
		return o.h.deleteLink(ifb)
	}
	return nil
}

func (o ingressShaper) check() error {
	if o.rate == 0 {
		return nil
	}
	ifb, err := o.h.linkByName(o.ifb)
	if err != nil {
		return err
	}
	if ifb == nil {
		return fmt.Errorf("link %s in %s: missing", o.ifb, o.h.where)
	}
	for _, obj := range []object{
		linkObj{h: o.h, link: ifb, mtu: o.mtu},
		tbfObj{h: o.h, link: ifb, rate: o.rate, mtu: o.mtu},
	} {
		if err := obj.check(); err != nil {
			return err
		}
	}
	q, err := o.ingressQdisc()
	if err != nil {
		return err
	}
	if q == nil {
		return fmt.Errorf("qdisc ingress on %s: missing", o.dev.Attrs().Name)
	}
	ok, err := o.redirect(ifb)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("filter redirecting %s to %s: missing", o.dev.Attrs().Name, o.ifb)
	}
	return nil
}
