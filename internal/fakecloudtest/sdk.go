package fakecloudtest

import (
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth/credentials"
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
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatalf("fakecloud URL: %v", err)
	}
	cfg := sdk.NewConfig()
	cfg.Scheme, cfg.Timeout, cfg.AutoRetry = "HTTP", 10*time.Second, false
	sdkMu.Lock()
	c, err := vpc.NewClientWithOptions(fakecloud.DefaultRegion, cfg, credentials.NewAccessKeyCredential(accessKeyID, secret))
	sdkMu.Unlock()
	if err != nil {
		t.Fatalf("vpc client: %v", err)
	}
	c.Domain = u.Host
	return c
}
