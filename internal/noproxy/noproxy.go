// Package noproxy keeps test and lab processes from sending loopback
// traffic through an HTTP proxy.
//
// The Aliyun SDK (v1) proxies even loopback requests when a proxy
// variable is set, and keeps the proxy for the client's whole life
// (aliyun-wire.md §1.5). A CI runner with HTTP_PROXY set would then send
// every fakecloud call to the proxy. Call Unset once, before any client
// is made — in TestMain, or at the start of a lab command.
package noproxy

import (
	"os"
	"testing"
)

// Unset removes every proxy variable from the environment and marks
// loopback as never proxied, for clients that honour NO_PROXY.
func Unset() {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		_ = os.Unsetenv(k)
	}
	_ = os.Setenv("NO_PROXY", "127.0.0.1,localhost")
}

// Main is the TestMain of a package whose tests make SDK or HTTP clients
// for loopback: it unsets the proxy before any test runs.
func Main(m *testing.M) {
	Unset()
	os.Exit(m.Run())
}
