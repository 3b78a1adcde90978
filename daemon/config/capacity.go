package config

import (
	"fmt"
)

// ENICapacity is what one instance type allows the daemon once eni_cap_ratio,
// eni_cap_shift and max_eni are applied (terway-facts §4, Terway v1.5+/main).
type ENICapacity struct {
	// Adapters is the instance type's EniQuantity (eth0 included).
	Adapters int
	// IPv4PerAdapter is EniPrivateIpAddressQuantity (the ENI's primary IP
	// included: the primary IP of a secondary ENI is handed to pods too).
	IPv4PerAdapter int
	// MaxENI is the number of secondary ENIs the daemon may attach:
	// int(Adapters × eni_cap_ratio) + eni_cap_shift − 1, capped by max_eni
	// when max_eni > 0. The −1 keeps eth0 out.
	MaxENI int
	// ENIMultiIP is the pod capacity in ENIMultiIP mode: MaxENI × IPv4PerAdapter.
	ENIMultiIP int
	// ENIOnly is the pod capacity in ENIOnly mode (one ENI per pod): MaxENI.
	ENIOnly int
}

// maxAdapterProduct bounds Adapters × eni_cap_ratio, far above any
// instance type, so that the conversion to int cannot overflow.
const maxAdapterProduct = 1 << 20

// Capacity computes the ENI and pod capacity of an instance type with
// adapters ENIs (EniQuantity) of ipv4PerAdapter IPv4 addresses each
// (EniPrivateIpAddressQuantity). Example: ecs.g7.xlarge has 4 adapters of 15
// IPs; with the defaults MaxENI = int(4 × 1) + 0 − 1 = 3, ENIMultiIP = 45,
// ENIOnly = 3.
//
// It fails when the instance figures are not positive, or when the
// configuration leaves the daemon no secondary ENI at all.
func (c *Config) Capacity(adapters, ipv4PerAdapter int) (ENICapacity, error) {
	if adapters < 1 {
		return ENICapacity{}, fmt.Errorf("instance type limits: ENI adapters must be >= 1, got %d", adapters)
	}
	if ipv4PerAdapter < 1 {
		return ENICapacity{}, fmt.Errorf("instance type limits: IPv4 addresses per ENI must be >= 1, got %d", ipv4PerAdapter)
	}
	ratio := c.ENICapRatio
	if ratio == 0 {
		ratio = DefaultENICapRatio
	}
	product := float64(adapters) * ratio
	if !(product >= 0 && product <= maxAdapterProduct) {
		return ENICapacity{}, &KeyError{Key: "eni_cap_ratio",
			Err: fmt.Errorf("%d adapters × %g is out of range", adapters, ratio)}
	}
	maxENI := int(product) + c.ENICapShift - 1
	if c.MaxENI > 0 && maxENI > c.MaxENI {
		maxENI = c.MaxENI
	}
	if maxENI < 1 {
		return ENICapacity{}, &KeyError{Key: "eni_cap_ratio, eni_cap_shift", Err: fmt.Errorf(
			"an instance with %d ENI adapters is left no secondary ENI: int(%d × %g) + %d − 1 = %d, want >= 1",
			adapters, adapters, ratio, c.ENICapShift, maxENI)}
	}
	return ENICapacity{
		Adapters:       adapters,
		IPv4PerAdapter: ipv4PerAdapter,
		MaxENI:         maxENI,
		ENIMultiIP:     maxENI * ipv4PerAdapter,
		ENIOnly:        maxENI,
	}, nil
}

// PoolSizes are the bounds of a node's idle pool.
type PoolSizes struct {
	// Capacity is the most resources the pool may hold (idle + in use).
	Capacity int
	// MinPoolSize is the warm-pool target: idle resources kept ready.
	MinPoolSize int
	// MaxPoolSize is the most idle resources kept; the excess is released.
	MaxPoolSize int
}

// PoolSizes derives the pool bounds for maxENI ENIs of ipsPerENI resources
// each: ENIMultiIP passes (MaxENI, IPv4PerAdapter), ENIOnly passes (MaxENI, 1)
// since each pod takes a whole ENI. The policy is Terway main's
// (getPoolConfig):
//
//  1. Capacity = maxENI × ipsPerENI.
//  2. MaxPoolSize = max_pool_size, clamped to Capacity.
//  3. MinPoolSize = min_pool_size, or min_eni × ipsPerENI when min_eni > 0
//     (min_eni overrides min_pool_size), clamped to Capacity.
//  4. If MinPoolSize > MaxPoolSize then MinPoolSize = MaxPoolSize. (Terway
//     v1.2.5 raised max instead; main lowers min, and so do we.) So min_eni
//     has full effect only when max_pool_size >= min_eni × ipsPerENI.
func (c *Config) PoolSizes(maxENI, ipsPerENI int) (PoolSizes, error) {
	if maxENI < 1 {
		return PoolSizes{}, fmt.Errorf("pool sizes: ENIs must be >= 1, got %d", maxENI)
	}
	if ipsPerENI < 1 {
		return PoolSizes{}, fmt.Errorf("pool sizes: resources per ENI must be >= 1, got %d", ipsPerENI)
	}
	capacity := maxENI * ipsPerENI
	maxPool := min(max(c.MaxPoolSize, 0), capacity)
	minPool := max(c.MinPoolSize, 0)
	switch {
	case c.MinENI >= maxENI: // also keeps the product below from overflowing
		minPool = capacity
	case c.MinENI > 0:
		minPool = c.MinENI * ipsPerENI
	}
	minPool = min(minPool, capacity, maxPool)
	return PoolSizes{Capacity: capacity, MinPoolSize: minPool, MaxPoolSize: maxPool}, nil
}
