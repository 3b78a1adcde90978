package cloud

// Tag keys the daemon puts on every ENI it creates, next to eni_tags, so
// that it (and only it) recognises its own ENIs again: at restore, in the
// pools' stray sync and in the orphan sweeps, also after eni_tags changed.
// The lab's audit judges orphans by the same keys. These are the one
// definition; code that writes or reads ownership imports them.
const (
	// TagCreator says which software created the ENI; the daemon writes
	// CreatorTerway.
	TagCreator = "creator"
	// TagInstanceID names the instance whose daemon created the ENI.
	TagInstanceID = "terway.alibabacloud.com/instance-id"
	// TagClusterID names the cluster (eni_conf cluster_id) whose daemon
	// created the ENI; written only when cluster_id is set.
	TagClusterID = "terway.alibabacloud.com/cluster-id"
	// CreatorTerway is the value of TagCreator on the daemon's ENIs.
	CreatorTerway = "terway"
)

// OwnerTags returns the ownership tags of the ENIs created by the daemon
// of instanceID in clusterID: TagCreator, TagInstanceID and, when
// clusterID is not empty, TagClusterID. The map is the caller's.
func OwnerTags(instanceID, clusterID string) map[string]string {
	tags := map[string]string{TagCreator: CreatorTerway, TagInstanceID: instanceID}
	if clusterID != "" {
		tags[TagClusterID] = clusterID
	}
	return tags
}

// HasTags reports whether have carries every tag of want with the same
// value; an empty want matches everything. It is the one matcher of
// ownership (and of eni_tag_filter, which the pools fold into their
// ownership tags).
func HasTags(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
