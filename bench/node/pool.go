package node

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PoolPolicy is the pool configuration a node benchmark varies (eni_conf
// keys min_pool_size, max_pool_size, min_eni and idle_ip_reclaim_*).
// Terway's ip_warm_up_size is accepted and ignored by our daemon: the
// warm-up knobs here are min_pool_size and min_eni, which the daemon
// fills at start and keeps filled.
type PoolPolicy struct {
	MinPoolSize int
	MaxPoolSize int
	// MinENI, when > 0, warms MinENI ENIs' worth of addresses.
	MinENI int
	// IdleReclaimAfter (simulated; 0: off), IdleReclaimInterval and
	// IdleReclaimBatch configure idle reclaim.
	IdleReclaimAfter    time.Duration
	IdleReclaimInterval time.Duration
	IdleReclaimBatch    int
}

// DefaultPool is Terway's chart default: min 0, max 5, no reclaim.
var DefaultPool = PoolPolicy{MaxPoolSize: 5}

// ParsePool reads "MIN/MAX[,reclaim=DUR][,reclaim-interval=DUR]
// [,reclaim-batch=N][,min-eni=N]", e.g. "0/5", "10/30",
// "0/5,reclaim=1m,reclaim-interval=10s".
func ParsePool(s string) (PoolPolicy, error) {
	parts := strings.Split(s, ",")
	minS, maxS, ok := strings.Cut(parts[0], "/")
	if !ok {
		return PoolPolicy{}, fmt.Errorf("pool %q: want MIN/MAX[,key=value...]", s)
	}
	var p PoolPolicy
	var err error
	if p.MinPoolSize, err = strconv.Atoi(minS); err != nil || p.MinPoolSize < 0 {
		return PoolPolicy{}, fmt.Errorf("pool %q: min %q is not a count", s, minS)
	}
	if p.MaxPoolSize, err = strconv.Atoi(maxS); err != nil || p.MaxPoolSize < 0 {
		return PoolPolicy{}, fmt.Errorf("pool %q: max %q is not a count", s, maxS)
	}
	// The keys after MIN/MAX, by the field they set.
	durations := map[string]*time.Duration{"reclaim": &p.IdleReclaimAfter, "reclaim-interval": &p.IdleReclaimInterval}
	counts := map[string]*int{"reclaim-batch": &p.IdleReclaimBatch, "min-eni": &p.MinENI}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return PoolPolicy{}, fmt.Errorf("pool %q: %q is not key=value", s, kv)
		}
		if d, ok := durations[k]; ok {
			if *d, err = time.ParseDuration(v); err != nil || *d < 0 {
				return PoolPolicy{}, fmt.Errorf("pool %q: %s=%q is not a duration", s, k, v)
			}
			continue
		}
		n, ok := counts[k]
		if !ok {
			return PoolPolicy{}, fmt.Errorf("pool %q: unknown key %q (reclaim, reclaim-interval, reclaim-batch, min-eni)", s, k)
		}
		if *n, err = strconv.Atoi(v); err != nil || *n < 0 {
			return PoolPolicy{}, fmt.Errorf("pool %q: %s=%q is not a count", s, k, v)
		}
	}
	return p, nil
}

// String is the policy in ParsePool's syntax.
func (p PoolPolicy) String() string {
	s := fmt.Sprintf("%d/%d", p.MinPoolSize, p.MaxPoolSize)
	if p.IdleReclaimAfter > 0 {
		s += ",reclaim=" + p.IdleReclaimAfter.String()
	}
	if p.IdleReclaimInterval > 0 {
		s += ",reclaim-interval=" + p.IdleReclaimInterval.String()
	}
	if p.IdleReclaimBatch > 0 {
		s += ",reclaim-batch=" + strconv.Itoa(p.IdleReclaimBatch)
	}
	if p.MinENI > 0 {
		s += ",min-eni=" + strconv.Itoa(p.MinENI)
	}
	return s
}

// config is the policy as eni_conf keys (simulated time).
func (p PoolPolicy) config() map[string]any {
	m := map[string]any{"min_pool_size": p.MinPoolSize, "max_pool_size": p.MaxPoolSize}
	if p.MinENI > 0 {
		m["min_eni"] = p.MinENI
	}
	if p.IdleReclaimAfter > 0 {
		m["idle_ip_reclaim_after"] = p.IdleReclaimAfter.String()
	}
	if p.IdleReclaimInterval > 0 {
		m["idle_ip_reclaim_interval"] = p.IdleReclaimInterval.String()
	}
	if p.IdleReclaimBatch > 0 {
		m["idle_ip_reclaim_batch_size"] = p.IdleReclaimBatch
	}
	return m
}

// slug is the policy as a file-name-safe word: "0-5", "0-5-reclaim1m0s".
func (p PoolPolicy) slug() string {
	return strings.NewReplacer("/", "-", ",", "-", "=", "").Replace(p.String())
}
