package fakecloud

import (
	"container/heap"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
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
	inst := bound
	if inst == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		a, err2 := netip.ParseAddr(host)
		if err != nil || err2 != nil {
			http.Error(w, "cannot tell the source address", http.StatusForbidden)
			return
		}
		c.mu.Lock()
		in := c.st.instanceByIP(a)
		c.mu.Unlock()
		if in == nil {
			http.Error(w, "no instance has the source address "+a.String(), http.StatusForbidden)
			return
		}
		inst = in.ID
	}
	now := c.now()
	if r.URL.Path == "/latest/api/token" {
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
	} else if c.tokenRequired(inst) {
		http.Error(w, "a metadata token is required", http.StatusForbidden)
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/latest/meta-data/")
	if !ok {
		if r.URL.Path == "/latest/meta-data" || r.URL.Path == "/latest/" || r.URL.Path == "/latest" {
			path = ""
		} else {
			http.NotFound(w, r)
			return
		}
	}
	body, found := c.metadataValue(inst, strings.Trim(path, "/"), strings.HasSuffix(path, "/") || path == "")
	if !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(body))
}

func (c *Cloud) tokenRequired(inst string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.st.Instances[inst]
	return in != nil && in.MetadataTokens == "required"
}

// metadataValue returns the body for one path of an instance's tree.
func (c *Cloud) metadataValue(inst, path string, dir bool) (string, bool) {
	if path == "ram/security-credentials" || strings.HasPrefix(path, "ram/security-credentials/") {
		return c.ramCredentials(inst, strings.TrimPrefix(strings.TrimPrefix(path, "ram/security-credentials"), "/"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.st.Instances[inst]
	if in == nil {
		return "", false
	}
	prim := c.st.ENIs[in.PrimaryENI]
	vsw := c.st.VSwitches[in.VSwitchID]
	vp := c.st.VPCs[in.VPCID]
	simple := map[string]string{
		"instance-id":            in.ID,
		"region-id":              c.st.Spec.RegionID,
		"zone-id":                in.ZoneID,
		"vpc-id":                 in.VPCID,
		"vpc-cidr-block":         vp.CIDR.String(),
		"vswitch-id":             in.VSwitchID,
		"vswitch-cidr-block":     vsw.CIDR.String(),
		"private-ipv4":           prim.PrimaryIP.String(),
		"mac":                    prim.MAC,
		"hostname":               in.Name,
		"image-id":               "aliyun_3_x64_20G_alibase_20240819.vhd",
		"owner-account-id":       c.st.Spec.AccountID,
		"network-type":           "vpc",
		"instance/instance-type": in.InstanceType,
		"instance/instance-name": in.Name,
		"dns-conf/nameservers":   "100.100.2.136\n100.100.2.138",
	}
	if v, ok := simple[path]; ok {
		return v, true
	}
	switch path {
	case "":
		return "dns-conf/\nhostname\nimage-id\ninstance/\ninstance-id\nmac\nnetwork/\nnetwork-type\nowner-account-id\n" +
			"private-ipv4\nram/\nregion-id\nvpc-cidr-block\nvpc-id\nvswitch-cidr-block\nvswitch-id\nzone-id", true
	case "instance":
		return "instance-name\ninstance-type", true
	case "network":
		return "interfaces/", true
	case "network/interfaces":
		return "macs/", true
	case "network/interfaces/macs":
		var lines []string
		for _, e := range c.metadataENIsLocked(in.ID) {
			lines = append(lines, e.MAC+"/")
		}
		return strings.Join(lines, "\n"), true
	case "ram":
		return "security-credentials/", true
	}
	rest, ok := strings.CutPrefix(path, "network/interfaces/macs/")
	if !ok {
		return "", false
	}
	mac, key, _ := strings.Cut(rest, "/")
	var e *eni
	for _, x := range c.metadataENIsLocked(in.ID) {
		if strings.EqualFold(x.MAC, mac) {
			e = x
		}
	}
	if e == nil {
		return "", false
	}
	return c.eniMetadataLocked(e, key)
}

// metadataENIsLocked lists the ENIs an instance's metadata shows now:
// attached ones once the metadata lag has passed, and detached ones until
// it has.
func (c *Cloud) metadataENIsLocked(inst string) []*eni {
	now := c.now()
	lag := c.scale(c.st.Spec.Settings.MetadataLag.D())
	var out []*eni
	for _, e := range c.st.ENIs {
		attached := e.InstanceID == inst && (e.Status == ENIInUse || e.Status == ENIDetaching) &&
			(e.Type == ENITypePrimary || !now.Before(e.AttachedAt.Add(lag)))
		stale := e.StaleInstanceID == inst && now.Before(e.StaleUntil)
		if attached || stale {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type == ENITypePrimary
		}
		return out[i].MAC < out[j].MAC
	})
	return out
}

// metadataAddrsLocked lists the addresses metadata shows for recs: those
// assigned at least the lag ago, plus those unassigned less than the lag
// ago.
func (c *Cloud) metadataAddrsLocked(recs, gone []addrRec) []netip.Addr {
	now := c.now()
	lag := c.scale(c.st.Spec.Settings.MetadataLag.D())
	var out []netip.Addr
	for _, r := range recs {
		if !now.Before(r.At.Add(lag)) {
			out = append(out, r.Addr)
		}
	}
	for _, r := range gone {
		if now.Before(r.At.Add(lag)) && !slices.Contains(out, r.Addr) {
			out = append(out, r.Addr)
		}
	}
	return out
}

// metadataGoneExpired reports whether metadata no longer lists an
// unassigned address.
func (c *Cloud) metadataGoneExpired(r addrRec, now time.Time) bool {
	return !now.Before(r.At.Add(c.scale(c.st.Spec.Settings.MetadataLag.D())))
}

func (c *Cloud) eniMetadataLocked(e *eni, key string) (string, bool) {
	v := c.st.VSwitches[e.VSwitchID]
	vp := c.st.VPCs[e.VPCID]
	switch key {
	case "":
		keys := "gateway\nmac\nnetmask\nnetwork-interface-id\nprimary-ip-address\nprivate-ipv4s\nvpc-cidr-block\nvpc-id\nvswitch-cidr-block\nvswitch-id"
		if v.pool6 != nil {
			keys += "\nipv6-gateway\nipv6s\nvpc-ipv6-cidr-blocks\nvswitch-ipv6-cidr-block"
		}
		return keys, true
	case "network-interface-id":
		return e.ID, true
	case "mac":
		return e.MAC, true
	case "primary-ip-address":
		return e.PrimaryIP.String(), true
	case "private-ipv4s":
		addrs := append([]netip.Addr{e.PrimaryIP}, c.metadataAddrsLocked(e.IPv4, e.Gone4)...)
		strs := make([]string, len(addrs))
		for i, a := range addrs {
			strs[i] = a.String()
		}
		b, _ := json.Marshal(strs)
		return string(b), true
	case "netmask":
		return net.IP(net.CIDRMask(v.CIDR.Bits(), 32)).String(), true
	case "gateway":
		return v.pool4.gateway().String(), true
	case "vswitch-id":
		return v.ID, true
	case "vpc-id":
		return e.VPCID, true
	case "vswitch-cidr-block":
		return v.CIDR.String(), true
	case "vpc-cidr-block":
		return vp.CIDR.String(), true
	}
	if v.pool6 == nil {
		return "", false
	}
	switch key {
	case "ipv6s":
		addrs := c.metadataAddrsLocked(e.IPv6, e.Gone6)
		if len(addrs) == 0 {
			return "", false
		}
		strs := make([]string, len(addrs))
		for i, a := range addrs {
			strs[i] = a.String()
		}
		return "[" + strings.Join(strs, ",") + "]", true
	case "ipv6-gateway":
		return v.pool6.gateway().String(), true
	case "vswitch-ipv6-cidr-block":
		return v.IPv6CIDR.String(), true
	case "vpc-ipv6-cidr-blocks":
		return vp.IPv6CIDR.String(), true
	}
	return "", false
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

// ramCredentials serves the role listing and the role's STS credentials.
// A credential is reused until half its lifetime has passed, then a new
// one is issued; old ones stay valid until they expire.
func (c *Cloud) ramCredentials(inst, role string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.st.Instances[inst]
	if in == nil || in.RAMRole == "" {
		return "", false
	}
	if role == "" {
		return in.RAMRole, true
	}
	if role != in.RAMRole {
		return "", false
	}
	now := c.now()
	life := c.st.Spec.Settings.STSLifetime.D()
	var cur *stsCred
	for k, cred := range c.st.STS {
		if !now.Before(cred.Expires) {
			delete(c.st.STS, k)
			c.dirty.cred(k)
			continue
		}
		if cred.InstanceID == inst && cred.Role == role && (cur == nil || cred.Issued.After(cur.Issued)) {
			cur = cred
		}
	}
	if cur == nil || now.Sub(cur.Issued) > life/2 {
		cur = &stsCred{AccessKeyID: "STS." + randomString(28), Secret: randomString(40), Token: "CAIS" + randomString(120),
			InstanceID: inst, Role: role, Issued: now, Expires: now.Add(life)}
		c.st.STS[cur.AccessKeyID] = cur
		c.dirty.cred(cur.AccessKeyID)
	}
	if err := c.commitLocked(); err != nil {
		return "", false
	}
	b, _ := json.MarshalIndent(stsJSON{AccessKeyID: cur.AccessKeyID, AccessKeySecret: cur.Secret,
		Expiration: apiTime(cur.Expires), SecurityToken: cur.Token, LastUpdated: apiTime(cur.Issued), Code: "Success"}, "", "  ")
	return string(b), true
}

const randomAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomString returns n characters from crypto/rand: credentials and
// tokens must not be predictable, even from the seed.
func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	for i := range b {
		b[i] = randomAlphabet[int(b[i])%len(randomAlphabet)]
	}
	return string(b)
}
