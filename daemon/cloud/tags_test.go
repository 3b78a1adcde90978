package cloud

import (
	"maps"
	"testing"
)

// The ownership tags are Terway's keys with the daemon's values; the
// cluster tag only when a cluster is named. Literal keys on purpose: they
// are on ENIs in the cloud and must not change with a rename here.
func TestOwnerTags(t *testing.T) {
	got := OwnerTags("i-1", "c-1")
	want := map[string]string{"creator": "terway", "terway.alibabacloud.com/instance-id": "i-1",
		"terway.alibabacloud.com/cluster-id": "c-1"}
	if !maps.Equal(got, want) {
		t.Errorf("OwnerTags(i-1, c-1) = %v, want %v", got, want)
	}
	if got := OwnerTags("i-1", ""); len(got) != 2 || got[TagClusterID] != "" {
		t.Errorf("OwnerTags without a cluster = %v, want no cluster tag", got)
	}
}

func TestHasTags(t *testing.T) {
	have := OwnerTags("i-1", "c-1")
	have["team"] = "net"
	cases := []struct {
		name string
		want map[string]string
		ok   bool
	}{
		{"nothing wanted", nil, true},
		{"own tags", OwnerTags("i-1", "c-1"), true},
		{"a subset", map[string]string{TagCreator: CreatorTerway}, true},
		{"another instance", OwnerTags("i-2", "c-1"), false},
		{"another cluster", OwnerTags("i-1", "c-2"), false},
		{"a tag it lacks", map[string]string{"team": "net", "env": "prod"}, false},
		{"an empty value is not a missing tag", map[string]string{"env": ""}, false},
	}
	for _, tc := range cases {
		if got := HasTags(have, tc.want); got != tc.ok {
			t.Errorf("%s: HasTags = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
