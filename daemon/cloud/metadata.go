package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/terway-sim/terway/daemon/backoff"
)

// DefaultMetadataEndpoint is the ECS instance metadata service.
const DefaultMetadataEndpoint = "http://100.100.100.200"

// ErrNotFound is returned for metadata paths that do not exist (404).
var ErrNotFound = errors.New("not found in instance metadata")

const (
	metadataTokenTTL    = 21600
	metadataTokenHeader = "X-aliyun-ecs-metadata-token"
	metadataTTLHeader   = "X-aliyun-ecs-metadata-token-ttl-seconds"
)

// Metadata is a client of the instance metadata service. It uses the
// token ("security hardening") mode when the service offers it, caches
// the token for half its lifetime, drops it on 401, and retries
// transport errors, 429 and 5xx with the "metadata" backoff policy.
type Metadata struct {
	base    string
	http    *http.Client
	clock   clock.Clock
	backoff *backoff.Set
	obs     Observer

	mu         sync.Mutex
	token      string
	tokenUntil time.Time
	noToken    bool // the service does not offer tokens
}

// NewMetadata returns a client for the service at base (empty means
// DefaultMetadataEndpoint).
func NewMetadata(base string, hc *http.Client, c clock.Clock, b *backoff.Set, obs Observer) *Metadata {
	if base == "" {
		base = DefaultMetadataEndpoint
	}
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	if c == nil {
		c = clock.RealClock{}
	}
	if b == nil {
		b = backoff.NewSet(c, nil)
	}
	if obs == nil {
		obs = NopObserver{}
	}
	return &Metadata{base: strings.TrimRight(base, "/"), http: hc, clock: c, backoff: b, obs: obs}
}

// retryable marks a metadata answer worth retrying.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// Get returns the body of a path under /latest/meta-data/.
func (m *Metadata) Get(ctx context.Context, path string) (string, error) {
	start := m.clock.Now()
	var body string
	err := m.backoff.Retry(ctx, backoff.Metadata, func(ctx context.Context) (bool, error) {
		b, err := m.getOnce(ctx, path)
		var r retryable
		if errors.As(err, &r) {
			return false, err
		}
		body = b
		return true, err
	})
	m.obs.MetadataCall(path, m.clock.Since(start), err)
	if err != nil {
		return "", fmt.Errorf("metadata %s: %w", path, err)
	}
	return body, nil
}

func (m *Metadata) getOnce(ctx context.Context, path string) (string, error) {
	for attempt := 0; attempt < 2; attempt++ {
		tok, err := m.tokenFor(ctx)
		if err != nil {
			return "", retryable{err}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/latest/meta-data/"+path, nil)
		if err != nil {
			return "", err
		}
		if tok != "" {
			req.Header.Set(metadataTokenHeader, tok)
		}
		resp, err := m.http.Do(req)
		if err != nil {
			return "", retryable{err}
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case err != nil:
			return "", retryable{err}
		case resp.StatusCode == http.StatusOK:
			return string(b), nil
		case resp.StatusCode == http.StatusNotFound:
			return "", ErrNotFound
		case resp.StatusCode == http.StatusUnauthorized && attempt == 0:
			m.dropToken()
			continue
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return "", retryable{fmt.Errorf("HTTP %d", resp.StatusCode)}
		default:
			return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		}
	}
	return "", errors.New("metadata token rejected twice")
}

// tokenFor returns a cached token, fetches one, or "" when the service
// offers none.
func (m *Metadata) tokenFor(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if m.noToken {
		return "", nil
	}
	if m.token != "" && now.Before(m.tokenUntil) {
		return m.token, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, m.base+"/latest/api/token", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set(metadataTTLHeader, fmt.Sprint(metadataTokenTTL))
	resp, err := m.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("metadata token: %w", err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK && len(b) > 0:
		m.token, m.tokenUntil = strings.TrimSpace(string(b)), now.Add(metadataTokenTTL/2*time.Second)
		return m.token, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		m.noToken = true // an old service without the token flow
		return "", nil
	default:
		return "", fmt.Errorf("metadata token: HTTP %d", resp.StatusCode)
	}
}

func (m *Metadata) dropToken() {
	m.mu.Lock()
	m.token = ""
	m.mu.Unlock()
}

// value returns the first line of a path, trimmed of "/", as Terway reads
// single values.
func (m *Metadata) value(ctx context.Context, path string) (string, error) {
	b, err := m.Get(ctx, path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(b, "\n")
	return strings.Trim(strings.TrimSpace(line), "/"), nil
}

// Instance is the identity of the instance the daemon runs on.
type Instance struct {
	ID           string
	RegionID     string
	ZoneID       string
	VPCID        string
	VSwitchID    string
	InstanceType string
	PrimaryMAC   string
}

// Instance reads the instance identity.
func (m *Metadata) Instance(ctx context.Context) (Instance, error) {
	var in Instance
	for _, f := range []struct {
		path string
		dst  *string
	}{
		{"instance-id", &in.ID}, {"region-id", &in.RegionID}, {"zone-id", &in.ZoneID}, {"vpc-id", &in.VPCID},
		{"vswitch-id", &in.VSwitchID}, {"instance/instance-type", &in.InstanceType}, {"mac", &in.PrimaryMAC},
	} {
		v, err := m.value(ctx, f.path)
		if err != nil {
			return Instance{}, err
		}
		*f.dst = v
	}
	in.PrimaryMAC = strings.ToLower(in.PrimaryMAC)
	return in, nil
}

// MACs lists the MACs of every attached ENI, the primary included.
func (m *Metadata) MACs(ctx context.Context) ([]string, error) {
	b, err := m.Get(ctx, "network/interfaces/macs/")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(b, "\n") {
		if l = strings.Trim(strings.TrimSpace(l), "/"); l != "" {
			out = append(out, strings.ToLower(l))
		}
	}
	return out, nil
}

// ENIMeta is what metadata says about one attached ENI.
type ENIMeta struct {
	ID        string
	MAC       string
	PrimaryIP netip.Addr
	IPv4      []netip.Addr // all IPv4 addresses, the primary included
	IPv6      []netip.Addr
	Gateway   netip.Addr
	Gateway6  netip.Addr
	VSwitchID string
	CIDR      netip.Prefix
	CIDR6     netip.Prefix
}

// ENI reads the metadata of the ENI with the given MAC. IPv6 fields stay
// empty when the vSwitch has no IPv6.
func (m *Metadata) ENI(ctx context.Context, mac string) (ENIMeta, error) {
	p := "network/interfaces/macs/" + mac + "/"
	e := ENIMeta{MAC: mac}
	var err error
	if e.ID, err = m.value(ctx, p+"network-interface-id"); err != nil {
		return e, err
	}
	if e.VSwitchID, err = m.value(ctx, p+"vswitch-id"); err != nil {
		return e, err
	}
	if e.PrimaryIP, err = m.addr(ctx, p+"primary-ip-address"); err != nil {
		return e, err
	}
	if e.Gateway, err = m.addr(ctx, p+"gateway"); err != nil {
		return e, err
	}
	if e.CIDR, err = m.prefix(ctx, p+"vswitch-cidr-block"); err != nil {
		return e, err
	}
	if e.IPv4, err = m.IPv4s(ctx, mac); err != nil {
		return e, err
	}
	if e.IPv6, err = m.IPv6s(ctx, mac); err != nil {
		return e, err
	}
	if e.CIDR6, err = m.prefix(ctx, p+"vswitch-ipv6-cidr-block"); err != nil && !errors.Is(err, ErrNotFound) {
		return e, err
	}
	if e.Gateway6, err = m.addr(ctx, p+"ipv6-gateway"); err != nil && !errors.Is(err, ErrNotFound) {
		return e, err
	}
	return e, nil
}

// IPv4s lists the IPv4 addresses of an ENI (the JSON array of
// private-ipv4s, primary included).
func (m *Metadata) IPv4s(ctx context.Context, mac string) ([]netip.Addr, error) {
	b, err := m.Get(ctx, "network/interfaces/macs/"+mac+"/private-ipv4s")
	if err != nil {
		return nil, err
	}
	var strs []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(b)), &strs); err != nil {
		return nil, fmt.Errorf("metadata private-ipv4s of %s: %w", mac, err)
	}
	return parseAddrs(strs)
}

// IPv6s lists the IPv6 addresses of an ENI (the bracketed, unquoted list
// of ipv6s); none when the path does not exist.
func (m *Metadata) IPv6s(ctx context.Context, mac string) ([]netip.Addr, error) {
	b, err := m.Get(ctx, "network/interfaces/macs/"+mac+"/ipv6s")
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b = strings.Trim(strings.TrimSpace(b), "[]")
	if b == "" {
		return nil, nil
	}
	var strs []string
	for _, s := range strings.Split(b, ",") {
		strs = append(strs, strings.Trim(strings.TrimSpace(s), `"`))
	}
	return parseAddrs(strs)
}

func parseAddrs(strs []string) ([]netip.Addr, error) {
	out := make([]netip.Addr, 0, len(strs))
	for _, s := range strs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("bad address %q in metadata: %w", s, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func (m *Metadata) addr(ctx context.Context, path string) (netip.Addr, error) {
	v, err := m.value(ctx, path)
	if err != nil {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("metadata %s: %w", path, err)
	}
	return a, nil
}

func (m *Metadata) prefix(ctx context.Context, path string) (netip.Prefix, error) {
	b, err := m.Get(ctx, path)
	if err != nil {
		return netip.Prefix{}, err
	}
	p, err := netip.ParsePrefix(strings.TrimSpace(b))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("metadata %s: %w", path, err)
	}
	return p, nil
}

// RAMRole returns the name of the instance's RAM role.
func (m *Metadata) RAMRole(ctx context.Context) (string, error) {
	return m.value(ctx, "ram/security-credentials/")
}

// RoleCredentials are the STS credentials of a RAM role.
type RoleCredentials struct {
	AccessKeyID     string `json:"AccessKeyId"`
	AccessKeySecret string `json:"AccessKeySecret"`
	SecurityToken   string `json:"SecurityToken"`
	Expiration      string `json:"Expiration"`
	Code            string `json:"Code"`
}

// Credentials fetches the STS credentials of role.
func (m *Metadata) Credentials(ctx context.Context, role string) (RoleCredentials, time.Time, error) {
	b, err := m.Get(ctx, "ram/security-credentials/"+role)
	if err != nil {
		return RoleCredentials{}, time.Time{}, err
	}
	var c RoleCredentials
	if err := json.Unmarshal([]byte(b), &c); err != nil {
		return RoleCredentials{}, time.Time{}, fmt.Errorf("RAM role %s credentials: %w", role, err)
	}
	if c.Code != "Success" || c.AccessKeyID == "" || c.AccessKeySecret == "" || c.SecurityToken == "" {
		return RoleCredentials{}, time.Time{}, fmt.Errorf("RAM role %s credentials incomplete (code %q)", role, c.Code)
	}
	exp, err := time.Parse("2006-01-02T15:04:05Z", c.Expiration)
	if err != nil {
		return RoleCredentials{}, time.Time{}, fmt.Errorf("RAM role %s credentials: expiration %q: %w", role, c.Expiration, err)
	}
	return c, exp, nil
}
