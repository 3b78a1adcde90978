package ipam

import (
	"strings"
	"testing"
)

// TestTagFilterMustBeInTags: a pool whose creation tags lack a tag of its
// TagFilter would not recognise its own ENIs after a restart (neither
// adopted nor swept); both pools refuse such a configuration.
func TestTagFilterMustBeInTags(t *testing.T) {
	tags := map[string]string{"creator": "terway", "team": "net"}
	for _, tc := range []struct {
		name   string
		filter map[string]string
		ok     bool
	}{
		{"none", nil, true},
		{"included", map[string]string{"team": "net"}, true},
		{"missing", map[string]string{"env": "prod"}, false},
		{"other value", map[string]string{"team": "ops"}, false},
	} {
		_, err := NewMultiIP(MultiIPConfig{MaxENI: 1, IPsPerENI: 2, Tags: tags, TagFilter: tc.filter}, nil, nil, nil, nil, nil)
		_, err2 := NewENIPool(ENIPoolConfig{MaxENI: 1, Tags: tags, TagFilter: tc.filter}, nil, nil, nil, nil, nil)
		for pool, err := range map[string]error{"MultiIP": err, "ENIPool": err2} {
			switch {
			case tc.ok && err != nil:
				t.Errorf("%s: %s refused: %v", tc.name, pool, err)
			case !tc.ok && err == nil:
				t.Errorf("%s: %s accepted filter %v with tags %v", tc.name, pool, tc.filter, tags)
			case !tc.ok && !strings.Contains(err.Error(), "tag filter"):
				t.Errorf("%s: %s error %q does not name the tag filter", tc.name, pool, err)
			}
		}
	}
}
