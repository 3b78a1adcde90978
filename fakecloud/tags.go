package fakecloud

import (
	"slices"
	"strings"

	"github.com/terway-sim/terway/fakecloud/wire"
)

// maxTagsPerResource is ECS's limit of tags on one resource.
const maxTagsPerResource = 20

// parseTags reads Tag.N.Key/Value and checks them as ECS does.
func parseTags(p wire.Params) ([]tag, error) {
	var out []tag
	for _, t := range p.Tags("Tag") {
		if t.Key == "" || len(t.Key) > 128 || hasPrefixFold(t.Key, "aliyun") || hasPrefixFold(t.Key, "acs:") {
			return nil, apiErr(400, CodeTagKeyMalformed, "The specified Tag.n.Key is not valid.")
		}
		if len(t.Value) > 128 {
			return nil, apiErr(400, "InvalidTagValue.Malformed", "The specified Tag.n.Value is not valid.")
		}
		if slices.ContainsFunc(out, func(x tag) bool { return x.Key == t.Key }) {
			return nil, apiErr(400, CodeTagKeyDuplicate, "The Tag.N.Key contain duplicate key.")
		}
		out = append(out, tag{Key: t.Key, Value: t.Value})
	}
	if len(out) > maxTagsPerResource {
		return nil, apiErr(400, "NumberExceed.Tags", "The Tags parameter's number is exceed , Valid : %d.", maxTagsPerResource)
	}
	return out, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// mergeTags sets add on have (replacing values of existing keys) and
// returns the result, or false when the resource would exceed the limit.
func mergeTags(have, add []tag) ([]tag, bool) {
	out := append([]tag(nil), have...)
	for _, t := range add {
		if i := slices.IndexFunc(out, func(x tag) bool { return x.Key == t.Key }); i >= 0 {
			out[i].Value = t.Value
			continue
		}
		out = append(out, t)
	}
	return out, len(out) <= maxTagsPerResource
}

// maxTagResourceIDs bounds ResourceId.N of TagResources.
const maxTagResourceIDs = 50

func (c *Cloud) tagResources(x *call) (response, error) {
	p := x.p
	rtype := p.String("ResourceType")
	if rtype == "" {
		return nil, apiErr(404, "MissingParameter.ResourceType", "The parameter - ResourceType should not be null.")
	}
	ids := p.List("ResourceId")
	if len(ids) == 0 {
		return nil, apiErr(404, "MissingParameter.ResourceIds", "The parameter - ResourceIds.N should not be null.")
	}
	if len(ids) > maxTagResourceIDs {
		return nil, apiErr(400, "NumberExceed.ResourceIds", "The ResourceIds parameter's number is exceed , Valid : %d.", maxTagResourceIDs)
	}
	tags, err := parseTags(p)
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, apiErr(404, "MissingParameter.Tags", "The parameter - Tags should not be null.")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	type target struct {
		tags *[]tag
		mark func()
	}
	var targets []target
	for _, id := range ids {
		var t target
		switch strings.ToLower(rtype) {
		case "eni":
			if e := c.st.ENIs[id]; e != nil {
				t = target{&e.Tags, func() { c.dirty.eni(id) }}
			}
		case "instance":
			if in := c.st.Instances[id]; in != nil {
				t = target{&in.Tags, func() { c.dirty.instance(id) }}
			}
		case "securitygroup":
			if g := c.st.SecurityGroups[id]; g != nil {
				t = target{&g.Tags, func() { c.dirty.sg(id) }}
			}
		default:
			return nil, apiErr(404, CodeResourceTypeNotFound, "The ResourceType provided does not exist in our records.")
		}
		if t.tags == nil {
			return nil, apiErr(404, CodeResourceNotFound, "The specified ResourceIds are not found in our records.")
		}
		if _, ok := mergeTags(*t.tags, tags); !ok {
			return nil, apiErr(400, CodeTagQuota, "The quota of tags on resource is beyond permitted range.")
		}
		targets = append(targets, t)
	}
	for _, t := range targets {
		*t.tags, _ = mergeTags(*t.tags, tags)
		t.mark()
	}
	return &base{}, c.commitLocked()
}
