package fakecloud

import (
	"slices"
	"strings"

	"github.com/terway-sim/terway/fakecloud/wire"
)

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

// maxTagResourceIDs bounds ResourceId.N of TagResources.
const maxTagResourceIDs = 50

// tagResources is ECS's TagResources (eni, instance, securitygroup).
func (c *Cloud) tagResources(x *call) (response, error) {
	return c.tagResourcesOf(x, func(rtype string) bool { return !strings.EqualFold(rtype, "eip") })
}

// tagVPCResources is VPC's TagResources, of which the emulation has EIPs.
func (c *Cloud) tagVPCResources(x *call) (response, error) {
	return c.tagResourcesOf(x, func(rtype string) bool { return strings.EqualFold(rtype, "eip") })
}

// tagResourcesOf tags resources of a type the product has (ours).
func (c *Cloud) tagResourcesOf(x *call, ours func(rtype string) bool) (response, error) {
	p := x.p
	rtype := p.String("ResourceType")
	if rtype == "" {
		return nil, apiErr(404, "MissingParameter.ResourceType", "The parameter - ResourceType should not be null.")
	}
	if !ours(rtype) {
		return nil, apiErr(404, CodeResourceTypeNotFound, "The ResourceType provided does not exist in our records.")
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
	return ack(c.w.tagResources(rtype, ids, tags))
}
