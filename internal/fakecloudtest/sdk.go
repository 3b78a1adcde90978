package fakecloudtest

import (
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"

	"github.com/terway-sim/terway/fakecloud"
)

// sdkMu serialises client construction: the old SDK's constructors fill
// a package-level endpoint map lazily and race with each other.
var sdkMu sync.Mutex

// VPCClient returns a client of the real SDK's VPC API that calls the
// fakecloud served at apiURL over plain HTTP as the AccessKey given, with
// a 10 s timeout and without retries, so that a test sees every answer
// and fakecloud counts every call. It is not safe for concurrent use (no
// SDK client is). The SDK proxies even loopback requests: the test's
// TestMain must call noproxy.Unset.
func VPCClient(t testing.TB, apiURL, accessKeyID, secret string) *vpc.Client {
	t.Helper()
	c := sdkClient(t, accessKeyID, secret, vpc.NewClientWithOptions)
	c.Domain = host(t, apiURL)
	return c
}

// ECSClient is VPCClient for the ECS API.
func ECSClient(t testing.TB, apiURL, accessKeyID, secret string) *ecs.Client {
	t.Helper()
	c := sdkClient(t, accessKeyID, secret, ecs.NewClientWithOptions)
	c.Domain = host(t, apiURL)
	return c
}

// sdkClient builds an SDK client with newClient as VPCClient says; the
// caller points it at the host.
func sdkClient[C any](t testing.TB, accessKeyID, secret string,
	newClient func(string, *sdk.Config, auth.Credential) (C, error)) C {
	t.Helper()
	cfg := sdk.NewConfig()
	cfg.Scheme, cfg.Timeout, cfg.AutoRetry = "HTTP", 10*time.Second, false
	sdkMu.Lock()
	c, err := newClient(fakecloud.DefaultRegion, cfg, credentials.NewAccessKeyCredential(accessKeyID, secret))
	sdkMu.Unlock()
	if err != nil {
		t.Fatalf("SDK client: %v", err)
	}
	return c
}

// host is apiURL's host and port.
func host(t testing.TB, apiURL string) string {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatalf("fakecloud URL: %v", err)
	}
	return u.Host
}
