package cloud

import (
	"strings"
	"sync"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
)

// NewVPCClient follows the daemon's endpoint rules: an http(s) URL pins the
// SDK's Domain, "" keeps the SDK's resolution, anything else is refused
// with the endpoint named. Built from many goroutines at once, next to
// the daemon's own constructions, it must not race (run with -race).
func TestNewVPCClient(t *testing.T) {
	cred := credentials.NewAccessKeyCredential("ak", "sk")
	cl, err := NewVPCClient("cn-hangzhou", cred, SDKOptions{Endpoint: "http://127.0.0.1:9"})
	if err != nil || cl.Domain != "127.0.0.1:9" {
		t.Fatalf("NewVPCClient(http://127.0.0.1:9) = Domain %q, %v", cl.Domain, err)
	}
	cl, err = NewVPCClient("cn-hangzhou", cred, SDKOptions{})
	if err != nil || cl.Domain != "" {
		t.Fatalf("NewVPCClient(\"\") = Domain %q, %v; want the SDK's resolution", cl.Domain, err)
	}
	if _, err := NewVPCClient("cn-hangzhou", cred, SDKOptions{Endpoint: "ftp://x"}); err == nil ||
		!strings.Contains(err.Error(), `"ftp://x" must be http(s)://host[:port]`) {
		t.Fatalf("NewVPCClient(ftp://x) error = %v", err)
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				_, err = NewVPCClient("cn-hangzhou", cred, SDKOptions{Endpoint: "http://127.0.0.1:9"})
			} else {
				_, err = newECSClient("cn-hangzhou", endpoint{scheme: "HTTP", host: "127.0.0.1:9"}, cred, 0, "", nil)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
