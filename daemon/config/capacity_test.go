package config

import (
	"errors"
	"strings"
	"testing"
)

func TestCapacity(t *testing.T) {
	cases := []struct {
		name                        string
		doc                         string
		adapters, ipv4              int
		maxENI, multiIP, eniOnly    int
		wantErr, wantKey, wantInErr string
	}{
		// ecs.g7.xlarge: EniQuantity 4, EniPrivateIpAddressQuantity 15.
		{name: "g7.xlarge defaults", doc: `{}`, adapters: 4, ipv4: 15, maxENI: 3, multiIP: 45, eniOnly: 3},
		{name: "ratio 0.5", doc: `{"eni_cap_ratio": 0.5}`, adapters: 4, ipv4: 15, maxENI: 1, multiIP: 15, eniOnly: 1},
		{name: "ratio truncates: int(3 × 0.5) = 1", doc: `{"eni_cap_ratio": 0.5, "eni_cap_shift": 1}`, adapters: 3, ipv4: 10, maxENI: 1, multiIP: 10, eniOnly: 1},
		{name: "ratio 2", doc: `{"eni_cap_ratio": 2}`, adapters: 4, ipv4: 15, maxENI: 7, multiIP: 105, eniOnly: 7},
		{name: "shift +1", doc: `{"eni_cap_shift": 1}`, adapters: 4, ipv4: 15, maxENI: 4, multiIP: 60, eniOnly: 4},
		{name: "shift -1", doc: `{"eni_cap_shift": -1}`, adapters: 4, ipv4: 15, maxENI: 2, multiIP: 30, eniOnly: 2},
		{name: "max_eni caps", doc: `{"max_eni": 2}`, adapters: 4, ipv4: 15, maxENI: 2, multiIP: 30, eniOnly: 2},
		{name: "max_eni above the instance does nothing", doc: `{"max_eni": 10}`, adapters: 4, ipv4: 15, maxENI: 3, multiIP: 45, eniOnly: 3},
		{name: "ratio and shift and cap together", doc: `{"eni_cap_ratio": 1.5, "eni_cap_shift": 2, "max_eni": 8}`, adapters: 8, ipv4: 20, maxENI: 8, multiIP: 160, eniOnly: 8},
		{name: "two adapters: one secondary ENI", doc: `{}`, adapters: 2, ipv4: 6, maxENI: 1, multiIP: 6, eniOnly: 1},
		{name: "single adapter leaves nothing", doc: `{}`, adapters: 1, ipv4: 6,
			wantErr: "no secondary ENI", wantKey: "eni_cap_ratio, eni_cap_shift", wantInErr: "int(1 × 1) + 0 − 1 = 0"},
		{name: "small ratio leaves nothing", doc: `{"eni_cap_ratio": 0.25}`, adapters: 4, ipv4: 15,
			wantErr: "no secondary ENI", wantKey: "eni_cap_ratio, eni_cap_shift", wantInErr: "int(4 × 0.25) + 0 − 1 = 0"},
		{name: "negative shift leaves nothing", doc: `{"eni_cap_shift": -3}`, adapters: 4, ipv4: 15,
			wantErr: "no secondary ENI", wantKey: "eni_cap_ratio, eni_cap_shift", wantInErr: "= 0"},
		{name: "huge ratio", doc: `{"eni_cap_ratio": 1e300}`, adapters: 4, ipv4: 15,
			wantErr: "out of range", wantKey: "eni_cap_ratio"},
		{name: "no adapters", doc: `{}`, adapters: 0, ipv4: 15, wantErr: "ENI adapters must be >= 1, got 0"},
		{name: "no IPs", doc: `{}`, adapters: 4, ipv4: 0, wantErr: "IPv4 addresses per ENI must be >= 1, got 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.doc)
			got, err := c.Capacity(tc.adapters, tc.ipv4)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Capacity = %+v, want error %q", got, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.wantInErr) {
					t.Errorf("error %q, want %q and %q", err, tc.wantErr, tc.wantInErr)
				}
				var ke *KeyError
				switch {
				case tc.wantKey == "" && errors.As(err, &ke):
					t.Errorf("error %q blames key %q; the instance figures are at fault", err, ke.Key)
				case tc.wantKey != "" && (!errors.As(err, &ke) || ke.Key != tc.wantKey):
					t.Errorf("error %q, want a KeyError for %q", err, tc.wantKey)
				}
				return
			}
			if err != nil {
				t.Fatalf("Capacity: %v", err)
			}
			want := ENICapacity{Adapters: tc.adapters, IPv4PerAdapter: tc.ipv4, MaxENI: tc.maxENI, ENIMultiIP: tc.multiIP, ENIOnly: tc.eniOnly}
			if got != want {
				t.Errorf("Capacity = %+v, want %+v", got, want)
			}
		})
	}
}

func TestPoolSizes(t *testing.T) {
	cases := []struct {
		name              string
		doc               string
		maxENI, ipsPerENI int
		want              PoolSizes
		wantErr           string
	}{
		{name: "defaults: no idle pool", doc: `{}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 0, MaxPoolSize: 0}},
		{name: "plain", doc: `{"max_pool_size": 5, "min_pool_size": 2}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 2, MaxPoolSize: 5}},
		{name: "min > max: min := max (Terway main)", doc: `{"max_pool_size": 5, "min_pool_size": 10}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 5, MaxPoolSize: 5}},
		{name: "min > max = 0", doc: `{"min_pool_size": 10}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 0, MaxPoolSize: 0}},
		{name: "max clamped to capacity", doc: `{"max_pool_size": 100, "min_pool_size": 3}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 3, MaxPoolSize: 45}},
		{name: "both clamped to capacity", doc: `{"max_pool_size": 100, "min_pool_size": 80}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 45, MaxPoolSize: 45}},
		{name: "min_eni overrides min_pool_size", doc: `{"max_pool_size": 40, "min_pool_size": 2, "min_eni": 2}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 30, MaxPoolSize: 40}},
		{name: "min_eni limited by max_pool_size", doc: `{"max_pool_size": 20, "min_eni": 2}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 20, MaxPoolSize: 20}},
		{name: "min_eni above the ENIs there are", doc: `{"max_pool_size": 100, "min_eni": 9}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 45, MaxPoolSize: 45}},
		{name: "min_eni huge does not overflow", doc: `{"max_pool_size": 100, "min_eni": 9223372036854775807}`, maxENI: 3, ipsPerENI: 15,
			want: PoolSizes{Capacity: 45, MinPoolSize: 45, MaxPoolSize: 45}},
		{name: "ENIOnly: one per ENI", doc: `{"max_pool_size": 5, "min_eni": 2}`, maxENI: 3, ipsPerENI: 1,
			want: PoolSizes{Capacity: 3, MinPoolSize: 2, MaxPoolSize: 3}},
		{name: "no ENIs", doc: `{}`, maxENI: 0, ipsPerENI: 15, wantErr: "ENIs must be >= 1, got 0"},
		{name: "no IPs per ENI", doc: `{}`, maxENI: 3, ipsPerENI: 0, wantErr: "resources per ENI must be >= 1, got 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.doc)
			got, err := c.PoolSizes(tc.maxENI, tc.ipsPerENI)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("PoolSizes = %+v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("PoolSizes: %v", err)
			}
			if got != tc.want {
				t.Errorf("PoolSizes = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCapacityToPoolSizes runs the two steps together, as the daemon does.
func TestCapacityToPoolSizes(t *testing.T) {
	c := mustParse(t, `{"max_pool_size": 50, "min_pool_size": 10, "min_eni": 1}`)
	capa, err := c.Capacity(4, 15) // ecs.g7.xlarge
	if err != nil {
		t.Fatal(err)
	}
	multi, err := c.PoolSizes(capa.MaxENI, capa.IPv4PerAdapter)
	if err != nil {
		t.Fatal(err)
	}
	if want := (PoolSizes{Capacity: 45, MinPoolSize: 15, MaxPoolSize: 45}); multi != want {
		t.Errorf("ENIMultiIP pool = %+v, want %+v", multi, want)
	}
	only, err := c.PoolSizes(capa.MaxENI, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (PoolSizes{Capacity: 3, MinPoolSize: 1, MaxPoolSize: 3}); only != want {
		t.Errorf("ENIOnly pool = %+v, want %+v", only, want)
	}
	if multi.Capacity != capa.ENIMultiIP || only.Capacity != capa.ENIOnly {
		t.Errorf("pool capacities %d/%d disagree with Capacity %+v", multi.Capacity, only.Capacity, capa)
	}
}
