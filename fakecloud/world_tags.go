package fakecloud

import (
	"slices"
	"strings"
)

// maxTagsPerResource is ECS's limit of tags on one resource.
const maxTagsPerResource = 20

// tagResources sets tags on resources of type rtype (eni, instance,
// securitygroup; any case): on all of them or, when one is unknown or
// would exceed the tag limit, on none.
func (w *world) tagResources(rtype string, ids []string, tags []tag) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	targets := make([]*[]tag, 0, len(ids))
	for _, id := range ids {
		t, err := w.tagsOfLocked(rtype, id)
		if err != nil {
			return err
		}
		if _, ok := mergeTags(*t, tags); !ok {
			return apiErr(400, CodeTagQuota, "The quota of tags on resource is beyond permitted range.")
		}
		targets = append(targets, t)
	}
	for i, t := range targets {
		*t, _ = mergeTags(*t, tags)
		w.markTaggedLocked(rtype, ids[i])
	}
	return w.commitLocked()
}

// tagsOfLocked returns the tags of a resource.
func (w *world) tagsOfLocked(rtype, id string) (*[]tag, error) {
	var tags *[]tag
	switch strings.ToLower(rtype) {
	case "eni":
		if e := w.st.ENIs[id]; e != nil {
			tags = &e.Tags
		}
	case "instance":
		if in := w.st.Instances[id]; in != nil {
			tags = &in.Tags
		}
	case "securitygroup":
		if g := w.st.SecurityGroups[id]; g != nil {
			tags = &g.Tags
		}
	case "eip":
		if e := w.st.EIPs[id]; e != nil {
			tags = &e.Tags
		}
	default:
		return nil, apiErr(404, CodeResourceTypeNotFound, "The ResourceType provided does not exist in our records.")
	}
	if tags == nil {
		return nil, apiErr(404, CodeResourceNotFound, "The specified ResourceIds are not found in our records.")
	}
	return tags, nil
}

// markTaggedLocked journals a tagged resource.
func (w *world) markTaggedLocked(rtype, id string) {
	switch strings.ToLower(rtype) {
	case "eni":
		w.dirty.eni(id)
	case "instance":
		w.dirty.instance(id)
	case "securitygroup":
		w.dirty.sg(id)
	case "eip":
		w.dirty.eip(id)
	}
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
