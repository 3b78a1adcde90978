package k8s

import (
	"fmt"
	"strconv"
	"strings"
)

// Terway's pod annotations for an elastic IP of the pod's own.
const (
	// AnnotationPodWithEIP ("true") asks for an EIP bound to the pod's
	// address.
	AnnotationPodWithEIP = "k8s.aliyun.com/pod-with-eip"
	// AnnotationEIPInstanceID names an EIP the user allocated, to bind
	// instead of allocating one; it implies pod-with-eip. The daemon never
	// releases it.
	AnnotationEIPInstanceID = "k8s.aliyun.com/pod-eip-instanceid"
	// AnnotationEIPBandwidth is the bandwidth in Mbit/s (default 5).
	AnnotationEIPBandwidth = "k8s.aliyun.com/eip-bandwidth"
	// AnnotationEIPChargeType and AnnotationEIPInternetChargeType (the
	// newer name, which wins) are PayByTraffic or PayByBandwidth.
	AnnotationEIPChargeType         = "k8s.aliyun.com/eip-charge-type"
	AnnotationEIPInternetChargeType = "k8s.aliyun.com/eip-internet-charge-type"
	AnnotationEIPISP                = "k8s.aliyun.com/eip-isp"
	// AnnotationEIPBandwidthPackage is an Internet Shared Bandwidth to put
	// the EIP into.
	AnnotationEIPBandwidthPackage = "k8s.aliyun.com/eip-common-bandwidth-package-id"
	// AnnotationAllocatedEIP is written by the daemon: the pod's EIP
	// address.
	AnnotationAllocatedEIP = "k8s.aliyun.com/allocated-eipAddress"
)

// DefaultEIPBandwidth is Terway's default EIP bandwidth, Mbit/s.
const DefaultEIPBandwidth = 5

// EIPRequest is what a pod's annotations ask of its EIP.
type EIPRequest struct {
	// Wanted: the pod asks for an EIP at all.
	Wanted bool
	// ID is the user's EIP (pod-eip-instanceid); empty: allocate one.
	ID                 string
	Bandwidth          int
	InternetChargeType string
	ISP                string
	BandwidthPackageID string
}

// PodEIP reads the EIP annotations. A malformed value is an error naming
// the annotation, so the pod is told rather than silently given another
// EIP than asked.
func PodEIP(ann map[string]string) (EIPRequest, error) {
	r := EIPRequest{ID: strings.TrimSpace(ann[AnnotationEIPInstanceID]), Bandwidth: DefaultEIPBandwidth,
		ISP: strings.TrimSpace(ann[AnnotationEIPISP]), BandwidthPackageID: strings.TrimSpace(ann[AnnotationEIPBandwidthPackage])}
	if v := strings.TrimSpace(ann[AnnotationPodWithEIP]); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return r, fmt.Errorf("annotation %s=%q: want true or false", AnnotationPodWithEIP, v)
		}
		r.Wanted = b
	}
	if r.ID != "" {
		r.Wanted = true
	}
	if !r.Wanted {
		return r, nil
	}
	if v := strings.TrimSpace(ann[AnnotationEIPBandwidth]); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return r, fmt.Errorf("annotation %s=%q: want Mbit/s from 1 to 500", AnnotationEIPBandwidth, v)
		}
		r.Bandwidth = n
	}
	for _, k := range []string{AnnotationEIPChargeType, AnnotationEIPInternetChargeType} {
		switch v := strings.TrimSpace(ann[k]); v {
		case "":
		case "PayByTraffic", "PayByBandwidth":
			r.InternetChargeType = v
		default:
			return r, fmt.Errorf("annotation %s=%q: want PayByTraffic or PayByBandwidth", k, v)
		}
	}
	return r, nil
}
