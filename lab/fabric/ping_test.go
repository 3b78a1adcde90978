package fabric

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// ping pings dst (IPv4) from inside n until a reply or the timeout: the
// machine has no ping binary.
func ping(n *Node, dst netip.Addr, timeout time.Duration) error {
	var c net.PacketConn
	err := n.Do(func(ns.NetNS) error {
		var err error
		c, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return fmt.Errorf("raw ICMP socket in %s: %w", n.InstanceID(), err)
	}
	defer func() { _ = c.Close() }()
	// Like ping(8), one request per interval until a reply: right after a
	// link is set up the kernel activates it asynchronously (linkwatch),
	// and a first packet can be dropped meanwhile, as on a real NIC.
	const id = 0x4c41
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for seq := 1; ; seq++ {
		msg := []byte{8, 0, 0, 0, id >> 8, id & 0xff, byte(seq >> 8), byte(seq), 'l', 'a', 'b'}
		binary.BigEndian.PutUint16(msg[2:], icmpChecksum(msg))
		if _, err := c.WriteTo(msg, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return fmt.Errorf("send echo to %s: %w", dst, err)
		}
		next := time.Now().Add(200 * time.Millisecond)
		_ = c.SetReadDeadline(next)
		for {
			nr, from, err := c.ReadFrom(buf)
			if err != nil {
				if time.Now().After(deadline) {
					return fmt.Errorf("no echo reply from %s in %s (%d requests): %w", dst, timeout, seq, err)
				}
				break
			}
			src, _ := netip.ParseAddr(from.String())
			if nr >= 8 && buf[0] == 0 && src == dst && binary.BigEndian.Uint16(buf[4:]) == id {
				return nil
			}
		}
	}
}

func icmpChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
