package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// IPType is a pod's network type, as Terway names it.
type IPType string

// Pod network types.
const (
	// IPTypeVPCIP is an address of the node's podCIDR (VPC mode).
	IPTypeVPCIP IPType = "VPCIP"
	// IPTypeVPCENI is a whole ENI for the pod (exclusive ENI).
	IPTypeVPCENI IPType = "VPCENI"
	// IPTypeENIMultiIP is a secondary IP of a shared ENI.
	IPTypeENIMultiIP IPType = "ENIMultiIP"
)

// Valid reports whether t is one of the known network types.
func (t IPType) Valid() bool {
	switch t {
	case IPTypeVPCIP, IPTypeVPCENI, IPTypeENIMultiIP:
		return true
	}
	return false
}

// ResourceType is the kind of a Resource; the first four are Terway's names.
type ResourceType string

// Resource types.
const (
	// ResourceENI is a whole ENI; its ID is the ENI's MAC.
	ResourceENI ResourceType = "eni"
	// ResourceENIIP is a secondary IP of an ENI; its ID is "<mac>.<ip>"
	// (or "<mac>.<v4>-<v6>" when dual stack).
	ResourceENIIP ResourceType = "eniIp"
	// ResourceVeth is a host veth; its ID is the host-side link name.
	ResourceVeth ResourceType = "veth"
	// ResourceEIP is an elastic IP; its ID is the allocation ID.
	ResourceEIP ResourceType = "eip"
	// ResourceVPCIP is an address of the node's podCIDR (VPC mode).
	ResourceVPCIP ResourceType = "vpcIp"
)

// Valid reports whether t is one of the known resource types.
func (t ResourceType) Valid() bool {
	switch t {
	case ResourceENI, ResourceENIIP, ResourceVeth, ResourceEIP, ResourceVPCIP:
		return true
	}
	return false
}

// Resource is one network resource held by a pod. Its JSON field names are
// those of Terway's ResourceItem.
type Resource struct {
	Type   ResourceType `json:"type"`
	ID     string       `json:"id"`
	ENIID  string       `json:"eni_id,omitempty"`
	ENIMAC string       `json:"eni_mac,omitempty"`
	IPv4   string       `json:"ipv4,omitempty"`
	IPv6   string       `json:"ipv6,omitempty"`
	// EIP describes a ResourceEIP (ENIID is the ENI it is bound to); its
	// public address is not in IPv4, which holds pod addresses only.
	EIP *EIPInfo `json:"extra_eip_info,omitempty"`
}

// EIPInfo is what a pod's EIP record holds besides its allocation ID.
type EIPInfo struct {
	// Address is the public address.
	Address string `json:"address"`
	// PrivateIP is the pod address it is bound to.
	PrivateIP string `json:"associate_eniip,omitempty"`
	// Owned: the daemon allocated it and releases it with the pod; a
	// user's EIP (pod-eip-instanceid) is only unbound.
	Owned bool `json:"owned,omitempty"`
	// BandwidthPackageID is the Internet Shared Bandwidth the daemon put
	// it into, to take it out before releasing it.
	BandwidthPackageID string `json:"bandwidth_package_id,omitempty"`
}

// Attachment is what the daemon handed out to one pod, keyed
// "namespace/name" in bucket "attachments".
type Attachment struct {
	PodNamespace string     `json:"podNamespace"`
	PodName      string     `json:"podName"`
	PodUID       string     `json:"podUID,omitempty"`
	ContainerID  string     `json:"containerID,omitempty"`
	Netns        string     `json:"netns,omitempty"`
	IfName       string     `json:"ifName,omitempty"`
	IPType       IPType     `json:"ipType"`
	Resources    []Resource `json:"resources,omitempty"`
	// NetConf is what AllocIP replied, answered back by GetIPInfo. It must
	// be valid JSON (or empty); it is stored compacted.
	NetConf   json.RawMessage `json:"netConf,omitempty"`
	CreatedAt time.Time       `json:"createdAt,omitzero"`
	// StickyUntil is when a released sticky pod's resources may be
	// reclaimed; zero means not sticky (or not released).
	StickyUntil time.Time `json:"stickyUntil,omitzero"`
	// PodGone is when GC first saw the pod absent; zero while it exists.
	PodGone time.Time `json:"podGone,omitzero"`
}

// Key returns the attachment's key, "namespace/name".
func (a Attachment) Key() string { return a.PodNamespace + "/" + a.PodName }

// EIP returns the attachment's EIP record, if it has one.
func (a Attachment) EIP() (Resource, bool) {
	for _, r := range a.Resources {
		if r.Type == ResourceEIP && r.EIP != nil {
			return r, true
		}
	}
	return Resource{}, false
}

// PodInfo is what the daemon knew of a pod that is already gone from the API
// server, keyed "namespace/name" in bucket "pods".
type PodInfo struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	UID         string            `json:"uid,omitempty"`
	IPType      IPType            `json:"ipType,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	OwnerKinds  []string          `json:"ownerKinds,omitempty"`
	StickyIP    bool              `json:"stickyIP,omitempty"`
	// Ingress and Egress are bandwidth limits in bytes/s (0 = none).
	Ingress uint64    `json:"ingress,omitempty"`
	Egress  uint64    `json:"egress,omitempty"`
	SeenAt  time.Time `json:"seenAt,omitzero"`
}

// Key returns the pod's key, "namespace/name".
func (p PodInfo) Key() string { return p.Namespace + "/" + p.Name }

// IntentKind names a cloud operation.
type IntentKind string

// Cloud operations recorded as intents. Other non-empty kinds are accepted.
const (
	// IntentCreateENI is CreateNetworkInterface.
	IntentCreateENI IntentKind = "CreateENI"
	// IntentAttachENI is AttachNetworkInterface.
	IntentAttachENI IntentKind = "AttachENI"
	// IntentAssignIPs is AssignPrivateIpAddresses.
	IntentAssignIPs IntentKind = "AssignIPs"
	// IntentUnassignIPs is UnassignPrivateIpAddresses.
	IntentUnassignIPs IntentKind = "UnassignIPs"
	// IntentDetachENI is DetachNetworkInterface.
	IntentDetachENI IntentKind = "DetachENI"
	// IntentDeleteENI is DeleteNetworkInterface.
	IntentDeleteENI IntentKind = "DeleteENI"
	// IntentAssignIPv6 is AssignIpv6Addresses.
	IntentAssignIPv6 IntentKind = "AssignIPv6"
	// IntentUnassignIPv6 is UnassignIpv6Addresses.
	IntentUnassignIPv6 IntentKind = "UnassignIPv6"
)

// Intent is a cloud operation in flight, keyed by Key in bucket "intents".
// It is written before the cloud call, so that a restarted daemon can retry
// with the same ClientToken, and deleted after the call's outcome is known.
type Intent struct {
	Key         string     `json:"key"`
	Kind        IntentKind `json:"kind"`
	ClientToken string     `json:"clientToken,omitempty"`
	ENIID       string     `json:"eniID,omitempty"`
	VSwitchID   string     `json:"vSwitchID,omitempty"`
	Count       int        `json:"count,omitempty"`
	IPs         []string   `json:"ips,omitempty"`
	CreatedAt   time.Time  `json:"createdAt,omitzero"`
}

// validPodRef checks a namespace/name pair usable as a key.
func validPodRef(namespace, name string) error {
	if namespace == "" || name == "" {
		return fmt.Errorf("namespace and name must not be empty (got %q/%q)", namespace, name)
	}
	if strings.Contains(namespace, "/") || strings.Contains(name, "/") {
		return fmt.Errorf("namespace and name must not contain '/' (got %q/%q)", namespace, name)
	}
	return nil
}

func (a *Attachment) validate() error {
	if err := validPodRef(a.PodNamespace, a.PodName); err != nil {
		return fmt.Errorf("attachment: %w", err)
	}
	if !a.IPType.Valid() {
		return fmt.Errorf("attachment %s: unknown IPType %q", a.Key(), a.IPType)
	}
	for i, r := range a.Resources {
		if !r.Type.Valid() {
			return fmt.Errorf("attachment %s: resource %d: unknown type %q", a.Key(), i, r.Type)
		}
		if r.ID == "" {
			return fmt.Errorf("attachment %s: resource %d (%s): empty ID", a.Key(), i, r.Type)
		}
	}
	if len(a.NetConf) > 0 && !json.Valid(a.NetConf) {
		return fmt.Errorf("attachment %s: NetConf is not valid JSON", a.Key())
	}
	return nil
}

func (p *PodInfo) validate() error {
	if err := validPodRef(p.Namespace, p.Name); err != nil {
		return fmt.Errorf("pod: %w", err)
	}
	if p.IPType != "" && !p.IPType.Valid() {
		return fmt.Errorf("pod %s: unknown IPType %q", p.Key(), p.IPType)
	}
	return nil
}

func (in *Intent) validate() error {
	if in.Key == "" {
		return errors.New("intent: empty key")
	}
	if in.Kind == "" {
		return fmt.Errorf("intent %s: empty kind", in.Key)
	}
	if in.Count < 0 {
		return fmt.Errorf("intent %s: negative count %d", in.Key, in.Count)
	}
	return nil
}

func (a Attachment) clone() Attachment {
	a.Resources = slices.Clone(a.Resources)
	for i, r := range a.Resources {
		if r.EIP != nil {
			e := *r.EIP
			a.Resources[i].EIP = &e
		}
	}
	a.NetConf = slices.Clone(a.NetConf)
	return a
}

func (p PodInfo) clone() PodInfo {
	p.Annotations = maps.Clone(p.Annotations)
	p.OwnerKinds = slices.Clone(p.OwnerKinds)
	return p
}

func (in Intent) clone() Intent {
	in.IPs = slices.Clone(in.IPs)
	return in
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// trailing data: our own records must match our schema exactly.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// record is the set of record types, with what the generic bucket code
// needs of each.
type record interface {
	Attachment | PodInfo | Intent
}

// keyOf validates v and returns its key.
func keyOf[T record](v *T) (string, error) {
	switch r := any(v).(type) {
	case *Attachment:
		return r.Key(), r.validate()
	case *PodInfo:
		return r.Key(), r.validate()
	case *Intent:
		return r.Key, r.validate()
	}
	panic("unreachable")
}

func cloneOf[T record](v T) T {
	switch r := any(v).(type) {
	case Attachment:
		return any(r.clone()).(T)
	case PodInfo:
		return any(r.clone()).(T)
	case Intent:
		return any(r.clone()).(T)
	}
	panic("unreachable")
}

// encode validates v and returns its key, its JSON encoding and the value as
// it will read back from disk (times without monotonic clock, NetConf
// compacted), which is what the mirror holds.
func encode[T record](v T) (key string, data []byte, back T, err error) {
	if key, err = keyOf(&v); err != nil {
		return "", nil, back, err
	}
	if data, err = json.Marshal(v); err != nil {
		return "", nil, back, fmt.Errorf("encode %s: %w", key, err)
	}
	if err = decodeStrict(data, &back); err != nil {
		return "", nil, back, fmt.Errorf("encode %s: does not read back: %w", key, err)
	}
	return key, data, back, nil
}

// decode decodes a stored record and checks that it is stored under its own
// key and is valid.
func decode[T record](key, data []byte) (T, error) {
	var v T
	if err := decodeStrict(data, &v); err != nil {
		return v, fmt.Errorf("record %q: %w", key, err)
	}
	k, err := keyOf(&v)
	if err != nil {
		return v, fmt.Errorf("record %q: %w", key, err)
	}
	if k != string(key) {
		return v, fmt.Errorf("record %q: holds a record for %q", key, k)
	}
	return v, nil
}
