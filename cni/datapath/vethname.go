package datapath

import (
	"crypto/sha1" //nolint:gosec // a name derivation shared with Terway, not security
	"encoding/hex"
)

// VethName is the host-side veth name of a pod interface, Terway's
// scheme: prefix + the first 11 hex digits of sha1(namespace + "." + name
// + ifName), with ifName "" for eth0. With Terway's prefix "cali" it is 15
// characters, the kernel's limit.
func VethName(prefix, namespace, name, ifName string) string {
	if ifName == "eth0" {
		ifName = ""
	}
	sum := sha1.Sum([]byte(namespace + "." + name + ifName))
	return prefix + hex.EncodeToString(sum[:])[:11]
}
