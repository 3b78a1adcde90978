package fakecloud

import (
	"container/heap"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metadata service: the tree of http://100.100.100.200/latest/meta-data/
// for one instance, the token flow (PUT /latest/api/token) and RAM-role
// credentials. It identifies the instance by the request's source address
// (its primary private IP), as ECS does, unless the handler was bound to
// one instance for a loopback test.

const (
	tokenTTLHeader = "X-aliyun-ecs-metadata-token-ttl-seconds"
	tokenHeader    = "X-aliyun-ecs-metadata-token"
	maxTokenTTL    = 21600
)

// Bounds on live metadata tokens. Alibaba documents no limit on tokens
// (only the TTL range 1..21600 s), but an unbounded map lets one client
// grow fakecloud's memory for six hours per token; a PUT over a bound is
// answered 429 (see fakecloud/README.md). A client that caches its token
// for its TTL, as the SDKs and the daemon do, holds one or two.
const (
	// maxTokensPerInstance keeps one noisy instance from using up the
	// account-wide bound for every other instance.
	maxTokensPerInstance = 4096
	// maxTokensLive bounds the memory of all tokens (~250 B each).
	maxTokensLive = 1 << 17
)

type metadataToken struct {
	instance string
	expires  time.Time
}

// tokenExpiry is one entry of the expiry heap.
type tokenExpiry struct {
	at  time.Time
	tok string
}

// expiryHeap is a min-heap of token expiry times (container/heap). TTLs
// differ per token, so issue order is not expiry order and a plain FIFO
// would keep short-lived tokens until every older one expired.
type expiryHeap []tokenExpiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(tokenExpiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = tokenExpiry{} // drop the string for the collector
	*h = old[:len(old)-1]
	return x
}

// metadataTokens holds the live tokens. Expired ones are dropped at each
// issue by popping the expiry heap, so a PUT costs O(log n) plus the
// tokens that expired since the last one (each popped once): amortised
// O(log n), never a scan of all tokens under the lock.
type metadataTokens struct {
	mu         sync.Mutex
	tokens     map[string]metadataToken
	perInst    map[string]int
	expiry     expiryHeap
	maxLive    int
	maxPerInst int
}

func newMetadataTokens() *metadataTokens {
	return &metadataTokens{tokens: map[string]metadataToken{}, perInst: map[string]int{},
		maxLive: maxTokensLive, maxPerInst: maxTokensPerInstance}
}

// issue returns a new token for instance valid for ttl, or "" when a bound
// on live tokens is reached.
func (t *metadataTokens) issue(instance string, now time.Time, ttl time.Duration) string {
	tok := randomString(48)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	if len(t.tokens) >= t.maxLive || t.perInst[instance] >= t.maxPerInst {
		return ""
	}
	exp := now.Add(ttl)
	t.tokens[tok] = metadataToken{instance: instance, expires: exp}
	t.perInst[instance]++
	heap.Push(&t.expiry, tokenExpiry{at: exp, tok: tok})
	return tok
}

// expireLocked drops every token whose expiry is not after now.
func (t *metadataTokens) expireLocked(now time.Time) {
	for len(t.expiry) > 0 && !now.Before(t.expiry[0].at) {
		e := heap.Pop(&t.expiry).(tokenExpiry)
		v, ok := t.tokens[e.tok]
		if !ok {
			continue
		}
		delete(t.tokens, e.tok)
		if t.perInst[v.instance]--; t.perInst[v.instance] <= 0 {
			delete(t.perInst, v.instance)
		}
	}
}

func (t *metadataTokens) valid(tok, instance string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.tokens[tok]
	return ok && v.instance == instance && now.Before(v.expires)
}

// MetadataHandler serves the metadata service for one instance whatever
// the source address (for a listener bound to that instance).
func (c *Cloud) MetadataHandler(instanceID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer c.recoverHandler(w, r)
		c.serveMetadata(w, r, instanceID)
	})
}

// MetadataBySourceHandler serves the metadata service identifying the
// instance by the request's source address.
func (c *Cloud) MetadataBySourceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer c.recoverHandler(w, r)
		c.serveMetadata(w, r, "")
	})
}

func (c *Cloud) serveMetadata(w http.ResponseWriter, r *http.Request, bound string) {
	inst, ok := c.metadataInstance(w, r, bound)
	if !ok {
		return
	}
	now := c.w.now()
	if r.URL.Path == "/latest/api/token" {
		c.issueMetadataToken(w, r, inst, now)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	if tok := r.Header.Get(tokenHeader); tok != "" {
		if !c.tokens.valid(tok, inst, now) {
			http.Error(w, "invalid or expired metadata token", http.StatusUnauthorized)
			return
		}
	} else if c.w.metadataTokensRequired(inst) {
		http.Error(w, "a metadata token is required", http.StatusForbidden)
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/latest/meta-data/")
	if !ok {
		if r.URL.Path != "/latest/meta-data" && r.URL.Path != "/latest/" && r.URL.Path != "/latest" {
			http.NotFound(w, r)
			return
		}
		path = ""
	}
	body, found := c.metadataValue(inst, strings.Trim(path, "/"))
	if !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(body))
}

// metadataInstance returns the instance a metadata request is about: the
// one the handler is bound to, or the one whose primary address sent it.
// It answers the request itself when there is none.
func (c *Cloud) metadataInstance(w http.ResponseWriter, r *http.Request, bound string) (string, bool) {
	if bound != "" {
		return bound, true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	a, err2 := netip.ParseAddr(host)
	if err != nil || err2 != nil {
		http.Error(w, "cannot tell the source address", http.StatusForbidden)
		return "", false
	}
	inst, ok := c.w.instanceAt(a)
	if !ok {
		http.Error(w, "no instance has the source address "+a.String(), http.StatusForbidden)
	}
	return inst, ok
}

// issueMetadataToken serves PUT /latest/api/token.
func (c *Cloud) issueMetadataToken(w http.ResponseWriter, r *http.Request, inst string, now time.Time) {
	if r.Method != http.MethodPut {
		http.Error(w, "use PUT", http.StatusMethodNotAllowed)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(tokenTTLHeader))
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		http.Error(w, tokenTTLHeader+" must be 1.."+strconv.Itoa(maxTokenTTL), http.StatusBadRequest)
		return
	}
	tok := c.tokens.issue(inst, now, time.Duration(ttl)*time.Second)
	if tok == "" {
		// Tokens free up only as they expire; a client must reuse one.
		http.Error(w, "too many live metadata tokens: reuse a token until its TTL instead of asking for a new one", http.StatusTooManyRequests)
		return
	}
	_, _ = w.Write([]byte(tok))
}

// metadataValue returns the body for one path of an instance's tree.
func (c *Cloud) metadataValue(inst, path string) (string, bool) {
	if role, ok := strings.CutPrefix(path, "ram/security-credentials"); ok && (role == "" || role[0] == '/') {
		return c.ramCredentials(inst, strings.TrimPrefix(role, "/"))
	}
	m, ok := c.w.metadata(inst)
	if !ok {
		return "", false
	}
	if v, ok := c.instanceMetadata(m)[path]; ok {
		return v, true
	}
	if v, ok := metadataDirs[path]; ok {
		return v, true
	}
	if path == "network/interfaces/macs" {
		lines := make([]string, 0, len(m.enis))
		for _, e := range m.enis {
			lines = append(lines, e.MAC+"/")
		}
		return strings.Join(lines, "\n"), true
	}
	rest, ok := strings.CutPrefix(path, "network/interfaces/macs/")
	if !ok {
		return "", false
	}
	mac, key, _ := strings.Cut(rest, "/")
	for _, e := range m.enis {
		if strings.EqualFold(e.MAC, mac) {
			return eniMetadata(e, key)
		}
	}
	return "", false
}

// metadataDirs are the directory listings of the tree that do not depend
// on the instance.
var metadataDirs = map[string]string{
	"": "dns-conf/\nhostname\nimage-id\ninstance/\ninstance-id\nmac\nnetwork/\nnetwork-type\nowner-account-id\n" +
		"private-ipv4\nram/\nregion-id\nvpc-cidr-block\nvpc-id\nvswitch-cidr-block\nvswitch-id\nzone-id",
	"instance":           "instance-name\ninstance-type",
	"network":            "interfaces/",
	"network/interfaces": "macs/",
	"ram":                "security-credentials/",
}

// instanceMetadata is the instance's own leaves of the tree.
func (c *Cloud) instanceMetadata(m instanceMeta) map[string]string {
	return map[string]string{
		"instance-id":            m.ID,
		"region-id":              c.region,
		"zone-id":                m.ZoneID,
		"vpc-id":                 m.VPCID,
		"vpc-cidr-block":         m.vpcCIDR.String(),
		"vswitch-id":             m.VSwitchID,
		"vswitch-cidr-block":     m.vswitchCIDR.String(),
		"private-ipv4":           m.primaryIP.String(),
		"mac":                    m.mac,
		"hostname":               m.Name,
		"image-id":               "aliyun_3_x64_20G_alibase_20240819.vhd",
		"owner-account-id":       c.account,
		"network-type":           "vpc",
		"instance/instance-type": m.InstanceType,
		"instance/instance-name": m.Name,
		"dns-conf/nameservers":   "100.100.2.136\n100.100.2.138",
	}
}

// eniMetadata returns the body of one key under an ENI's MAC.
func eniMetadata(e eniMeta, key string) (string, bool) {
	v6 := e.IPv6CIDR.IsValid()
	switch key {
	case "":
		keys := "gateway\nmac\nnetmask\nnetwork-interface-id\nprimary-ip-address\nprivate-ipv4s\nvpc-cidr-block\nvpc-id\nvswitch-cidr-block\nvswitch-id"
		if v6 {
			keys += "\nipv6-gateway\nipv6s\nvpc-ipv6-cidr-blocks\nvswitch-ipv6-cidr-block"
		}
		return keys, true
	case "private-ipv4s":
		b, _ := json.Marshal(addrStrings(append([]netip.Addr{e.PrimaryIP}, e.IPv4...)))
		return string(b), true
	case "ipv6s":
		if !v6 || len(e.IPv6) == 0 {
			return "", false
		}
		return "[" + strings.Join(addrStrings(e.IPv6), ",") + "]", true
	}
	leaves := map[string]string{
		"network-interface-id": e.ID,
		"mac":                  e.MAC,
		"primary-ip-address":   e.PrimaryIP.String(),
		"netmask":              net.IP(net.CIDRMask(e.CIDR.Bits(), 32)).String(),
		"gateway":              e.Gateway.String(),
		"vswitch-id":           e.VSwitchID,
		"vpc-id":               e.vpcID,
		"vswitch-cidr-block":   e.CIDR.String(),
		"vpc-cidr-block":       e.vpcCIDR.String(),
	}
	if v6 {
		leaves["ipv6-gateway"] = e.IPv6Gateway.String()
		leaves["vswitch-ipv6-cidr-block"] = e.IPv6CIDR.String()
		leaves["vpc-ipv6-cidr-blocks"] = e.vpcIPv6CIDR.String()
	}
	v, ok := leaves[key]
	return v, ok
}

// addrStrings prints addresses.
func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}

// stsJSON is what ram/security-credentials/<role> answers.
type stsJSON struct {
	AccessKeyID     string `json:"AccessKeyId"`
	AccessKeySecret string `json:"AccessKeySecret"`
	Expiration      string `json:"Expiration"`
	SecurityToken   string `json:"SecurityToken"`
	LastUpdated     string `json:"LastUpdated"`
	Code            string `json:"Code"`
}

// ramCredentials serves the role listing (role "") and the role's STS
// credentials.
func (c *Cloud) ramCredentials(inst, role string) (string, bool) {
	if role == "" {
		return c.w.ramRole(inst)
	}
	cred, ok := c.w.roleCredential(inst, role)
	if !ok {
		return "", false
	}
	b, _ := json.MarshalIndent(stsJSON{AccessKeyID: cred.AccessKeyID, AccessKeySecret: cred.Secret,
		Expiration: apiTime(cred.Expires), SecurityToken: cred.Token, LastUpdated: apiTime(cred.Issued), Code: "Success"}, "", "  ")
	return string(b), true
}
