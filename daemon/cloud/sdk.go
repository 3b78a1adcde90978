package cloud

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk"
	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/auth"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/vpc"
)

// This file is the one place the project's production code builds
// alibaba-cloud-sdk-go clients: the daemon's Client and the lab's route
// controller (through NewVPCClient) share the endpoint rules, the SDK
// configuration and the construction mutex, so that two constructors in
// one process (many daemons and a controller in a test or the node
// simulation) cannot race on the SDK's globals.

// sdkConstructMu serialises SDK client construction: the constructors fill
// a package-level endpoint map lazily and race with each other.
var sdkConstructMu sync.Mutex

// The endpoint maps are also filled here, while the program initialises and
// no goroutine runs yet, so that code building clients without this mutex
// (tests, other tools) cannot race with ours on the lazy fill either.
var _, _ = ecs.GetEndpointMap(), vpc.GetEndpointMap()

// defaultSDKTimeout bounds one HTTP exchange with the API when the caller
// sets none.
const defaultSDKTimeout = 20 * time.Second

// endpoint is a parsed ECSEndpoint or VPCEndpoint.
type endpoint struct {
	scheme string // "HTTPS" or "HTTP"
	host   string // "" = the SDK's endpoint resolution
}

// parseEndpoint reads "" (the SDK's endpoint resolution over HTTPS),
// "http(s)://host[:port]" (an emulator, or a fixed endpoint) or a bare host
// (HTTPS).
func parseEndpoint(s string) (endpoint, error) {
	if s == "" {
		return endpoint{scheme: "HTTPS"}, nil
	}
	if !strings.Contains(s, "://") {
		return endpoint{scheme: "HTTPS", host: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return endpoint{}, fmt.Errorf("endpoint %q must be http(s)://host[:port] or a host", s)
	}
	return endpoint{scheme: strings.ToUpper(u.Scheme), host: u.Host}, nil
}

// SDKOptions say how NewVPCClient builds its SDK client.
type SDKOptions struct {
	// Endpoint is "" (the SDK's endpoint resolution over HTTPS),
	// "http(s)://host[:port]" or a bare HTTPS host, as Options.VPCEndpoint.
	Endpoint string
	// Timeout bounds one HTTP exchange with the API (0: 20s).
	Timeout time.Duration
	// UserAgent is added to the SDK's User-Agent header ("": "terway-sim").
	UserAgent string
}

// sdkConfig is the SDK configuration of every client: the SDK's own
// retries are off, since callers retry with their backoff policies (and,
// for mutating calls, with ClientTokens). A nil tr leaves the SDK its own
// transport.
func sdkConfig(ep endpoint, timeout time.Duration, userAgent string, tr http.RoundTripper) *sdk.Config {
	if timeout <= 0 {
		timeout = defaultSDKTimeout
	}
	if userAgent == "" {
		userAgent = "terway-sim"
	}
	cfg := sdk.NewConfig()
	cfg.Scheme = ep.scheme
	cfg.Timeout = timeout
	cfg.AutoRetry = false
	cfg.UserAgent = userAgent
	if tr != nil {
		cfg.Transport = tr
	}
	return cfg
}

// newECSClient builds an ECS SDK client under the construction mutex. An
// empty ep.host keeps the SDK's own endpoint resolution. The SDK's error
// is returned as is; callers say what they were building it for.
func newECSClient(region string, ep endpoint, cred auth.Credential, timeout time.Duration, userAgent string, tr http.RoundTripper) (*ecs.Client, error) {
	sdkConstructMu.Lock()
	defer sdkConstructMu.Unlock()
	cl, err := ecs.NewClientWithOptions(region, sdkConfig(ep, timeout, userAgent, tr), cred)
	if err != nil {
		return nil, err
	}
	cl.Domain = ep.host
	return cl, nil
}

// newVPCClient is newECSClient for VPC.
func newVPCClient(region string, ep endpoint, cred auth.Credential, timeout time.Duration, userAgent string, tr http.RoundTripper) (*vpc.Client, error) {
	sdkConstructMu.Lock()
	defer sdkConstructMu.Unlock()
	cl, err := vpc.NewClientWithOptions(region, sdkConfig(ep, timeout, userAgent, tr), cred)
	if err != nil {
		return nil, err
	}
	cl.Domain = ep.host
	return cl, nil
}

// NewVPCClient builds one VPC SDK client the way the daemon builds its own
// (same endpoint rules, SDK configuration and construction mutex), for
// callers that make their own VPC calls: the lab's route controller. The
// SDK's clients are not safe for concurrent use; the caller serialises its
// calls or builds one client per goroutine.
func NewVPCClient(region string, cred auth.Credential, o SDKOptions) (*vpc.Client, error) {
	ep, err := parseEndpoint(o.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("cloud: VPC %w", err)
	}
	cl, err := newVPCClient(region, ep, cred, o.Timeout, o.UserAgent, nil)
	if err != nil {
		return nil, fmt.Errorf("create VPC SDK client for %s: %w", region, err)
	}
	return cl, nil
}
