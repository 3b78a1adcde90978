package fabric

import (
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A real ENI moved into a pod namespace returns to the host when that
// namespace is destroyed; a veth is destroyed with it instead. So the
// fabric watches its ports: when the fabric end of a still-attached ENI
// disappears without a detach, the ENI is plugged again — same MAC, node
// end back in the node namespace as eth<DeviceIndex>, bridge port,
// neighbours and anti-spoofing set restored.

// startWatch subscribes to link changes in the fabric namespace.
func (f *Fabric) startWatch() {
	f.stopWatch = make(chan struct{})
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.watch(f.stopWatch)
	}()
}

// stopWatcher ends the watch; teardown waits for it with f.wg.
func (f *Fabric) stopWatcher() {
	if f.stopWatch != nil {
		close(f.stopWatch)
		f.stopWatch = nil
	}
}

// watch runs one subscription after another until stop: a subscription
// ends on a socket error (an overrun drops events), and every new one
// starts with a full reconcile so nothing missed stays missing.
func (f *Fabric) watch(stop <-chan struct{}) {
	for {
		done := make(chan struct{})
		ch := make(chan netlink.LinkUpdate, 64)
		err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
			Namespace:     &f.nsh,
			ErrorCallback: func(error) {}, // the closed channel says it all
		})
		if err != nil {
			close(done)
			f.log.Warn("subscribe to fabric link changes", "err", err)
		} else {
			f.reconcilePorts()
			f.drain(stop, done, ch)
		}
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drain handles updates until stop or the subscription's end; it reads ch
// until the library closes it, so the library's goroutine ends too.
func (f *Fabric) drain(stop <-chan struct{}, done chan struct{}, ch <-chan netlink.LinkUpdate) {
	stopped := false
	for {
		select {
		case u, ok := <-ch:
			if !ok {
				if !stopped {
					close(done)
				}
				return
			}
			if u.Header.Type == unix.RTM_DELLINK && !stopped {
				f.reconcilePorts()
			}
		case <-stop:
			if !stopped {
				stopped = true
				close(done)
			}
			stop = nil
		}
	}
}

// reconcilePorts re-plugs every recorded port whose fabric link is gone.
func (f *Fabric) reconcilePorts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.nl == nil {
		return
	}
	replugged := false
	for id, p := range f.ports {
		_, err := f.nl.LinkByName(p.name)
		if err == nil {
			continue
		}
		if !isNotFound(err) {
			f.log.Warn("look up ENI port", "port", p.name, "err", err)
			continue
		}
		n := f.nodes[p.instanceID]
		if n == nil || !n.running {
			continue
		}
		f.log.Info("ENI port vanished without a detach (its namespace was destroyed); plugging it again",
			"eni", id, "instance", p.instanceID, "node_link", p.nodeLinkName())
		if err := f.createPort(n, p); err != nil {
			f.log.Warn("re-plug ENI", "eni", id, "instance", p.instanceID, "err", err)
			continue
		}
		replugged = true
	}
	if replugged {
		if err := f.sync(); err != nil {
			f.log.Warn("sync fabric after re-plug", "err", err)
		}
	}
}
