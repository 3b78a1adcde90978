package fakecloud

import (
	"container/heap"
	"encoding/json"
	"errors"
	"io"
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

// metadataRead is one request to the metadata service on its way to an
// answer: which instance reads which path, and how the read is counted.
type metadataRead struct {
	c    *Cloud
	w    http.ResponseWriter
	r    *http.Request
	inst string
	path string // under /latest/
	// frozen, set by a stale fault, is the metadata to answer from.
	frozen *instanceMeta
}

func (c *Cloud) serveMetadata(w http.ResponseWriter, r *http.Request, bound string) {
	// path is relative to /latest/; one outside it keeps its leading
	// slash, so that it matches nothing in the tree.
	path, ok := strings.CutPrefix(r.URL.Path, "/latest/")
	if !ok {
		path = r.URL.Path
		if path == "/latest" {
			path = ""
		}
	}
	m := &metadataRead{c: c, w: w, r: r, path: path}
	inst, err := c.metadataInstance(r, bound)
	if err != nil {
		m.fail(http.StatusForbidden, err.Error())
		return
	}
	m.inst = inst
	if !m.underFaults() {
		return
	}
	now := c.w.now()
	if path == "api/token" {
		c.issueMetadataToken(m, now)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		m.fail(http.StatusMethodNotAllowed, "use GET")
		return
	}
	if !m.authorized(now) {
		return
	}
	tree, ok := strings.CutPrefix(path, "meta-data/")
	if !ok {
		if path != "meta-data" && path != "" {
			m.fail(http.StatusNotFound, "404 page not found")
			return
		}
		tree = ""
	}
	body, found := c.metadataValue(inst, strings.Trim(tree, "/"), m.frozen)
	if !found {
		m.fail(http.StatusNotFound, "404 page not found")
		return
	}
	m.answer(body)
}

// authorized checks the read's token, if any, or that the instance does
// not require one, and answers the read itself when not.
func (m *metadataRead) authorized(now time.Time) bool {
	if tok := m.r.Header.Get(tokenHeader); tok != "" {
		if !m.c.tokens.valid(tok, m.inst, now) {
			m.fail(http.StatusUnauthorized, "invalid or expired metadata token")
			return false
		}
	} else if m.c.w.metadataTokensRequired(m.inst) {
		m.fail(http.StatusForbidden, "a metadata token is required")
		return false
	}
	return true
}

// underFaults applies the metadata faults that fire for this read: an
// injected error is answered here (false), pauses and latency are waited
// out (false if the client gave up meanwhile), a stale fault's copy of
// the instance's metadata is what the read will be answered from.
func (m *metadataRead) underFaults() bool {
	c := m.c
	d := c.faults.decide(subject{service: ServiceMetadata, action: m.path, key: metadataKey(m.path),
		caller: m.inst, ids: []string{m.inst}})
	if d.err != nil {
		status := d.err.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		m.count("Http" + strconv.Itoa(status))
		m.w.Header().Set("Content-Type", "text/html")
		m.w.WriteHeader(status)
		_, _ = io.WriteString(m.w, metadataErrorPage(status))
		return false
	}
	// Unlike an API call, a read the client gave up on has nothing left
	// to do: it stops waiting.
	ctx := m.r.Context()
	for _, p := range d.before {
		c.faults.hold(p, ctx.Done())
	}
	err := c.waitOrDone(ctx, c.w.scale(d.latency))
	if err == nil {
		err = ctx.Err() // a hold the client left
	}
	switch {
	case errors.Is(err, errClosed):
		m.fail(http.StatusServiceUnavailable, "fakecloud is closing")
		return false
	case err != nil:
		m.count(OutcomeClientGone)
		return false
	}
	if d.stale != nil {
		if snap, ok := d.stale.frozen[m.inst]; ok {
			m.frozen = &snap
		}
	}
	return true
}

// metadataErrorPage is the body the metadata service answers an error
// with: an XHTML page naming the status.
func metadataErrorPage(status int) string {
	title := strconv.Itoa(status) + " - " + http.StatusText(status)
	return `<?xml version="1.0" encoding="iso-8859-1"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
	"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title>` + title + `</title>
 </head>
 <body>
  <h1>` + title + `</h1>
 </body>
</html>
`
}

// metadataKey is the path as the accounting and the fault call indexes
// count it: each ENI's MAC (the segment after macs/) written "{mac}", so
// that the counters do not grow with every ENI.
func metadataKey(path string) string {
	const macs = "network/interfaces/macs/"
	i := strings.Index(path, macs)
	if i < 0 {
		return path
	}
	head, rest := path[:i+len(macs)], path[i+len(macs):]
	if rest == "" {
		return path
	}
	_, tail, found := strings.Cut(rest, "/")
	if !found {
		return head + "{mac}"
	}
	return head + "{mac}/" + tail
}

// count records the read's outcome.
func (m *metadataRead) count(outcome string) {
	m.c.metaCalls.add(metadataKey(m.path), "", m.inst, outcome)
}

// fail answers an error in plain text, counted by its status.
func (m *metadataRead) fail(status int, msg string) {
	m.count("Http" + strconv.Itoa(status))
	http.Error(m.w, msg, status)
}

// answer answers body, counted as a success, or as stale when a stale
// fault's copy answered it.
func (m *metadataRead) answer(body string) {
	outcome := OutcomeSuccess
	if m.frozen != nil {
		outcome = OutcomeStale
	}
	m.count(outcome)
	m.w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(m.w, body)
}

// metadataInstance returns the instance a metadata request is about: the
// one the handler is bound to, or the one whose primary address sent it.
func (c *Cloud) metadataInstance(r *http.Request, bound string) (string, error) {
	if bound != "" {
		return bound, nil
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	a, err2 := netip.ParseAddr(host)
	if err != nil || err2 != nil {
		return "", errors.New("cannot tell the source address")
	}
	inst, ok := c.w.instanceAt(a)
	if !ok {
		return "", errors.New("no instance has the source address " + a.String())
	}
	return inst, nil
}

// issueMetadataToken serves PUT /latest/api/token.
func (c *Cloud) issueMetadataToken(m *metadataRead, now time.Time) {
	if m.r.Method != http.MethodPut {
		m.fail(http.StatusMethodNotAllowed, "use PUT")
		return
	}
	ttl, err := strconv.Atoi(m.r.Header.Get(tokenTTLHeader))
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		m.fail(http.StatusBadRequest, tokenTTLHeader+" must be 1.."+strconv.Itoa(maxTokenTTL))
		return
	}
	tok := c.tokens.issue(m.inst, now, time.Duration(ttl)*time.Second)
	if tok == "" {
		// Tokens free up only as they expire; a client must reuse one.
		m.fail(http.StatusTooManyRequests, "too many live metadata tokens: reuse a token until its TTL instead of asking for a new one")
		return
	}
	m.count(OutcomeSuccess)
	_, _ = io.WriteString(m.w, tok)
}

// metadataValue returns the body for one path of an instance's tree,
// from frozen if not nil (a stale fault), else as the world shows it now.
// RAM-role credentials are always current.
func (c *Cloud) metadataValue(inst, path string, frozen *instanceMeta) (string, bool) {
	if role, ok := strings.CutPrefix(path, "ram/security-credentials"); ok && (role == "" || role[0] == '/') {
		return c.ramCredentials(inst, strings.TrimPrefix(role, "/"))
	}
	m, ok := c.w.metadata(inst)
	if frozen != nil {
		m, ok = *frozen, true
	}
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
