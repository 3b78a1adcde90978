package k8s

import (
	"strings"
	"testing"
)

func TestPodEIP(t *testing.T) {
	for _, tc := range []struct {
		ann     map[string]string
		want    EIPRequest
		errPart string
	}{
		{nil, EIPRequest{Bandwidth: 5}, ""},
		{map[string]string{AnnotationPodWithEIP: "false", AnnotationEIPBandwidth: "junk"}, EIPRequest{Bandwidth: 5}, ""},
		{map[string]string{AnnotationPodWithEIP: "true"}, EIPRequest{Wanted: true, Bandwidth: 5}, ""},
		{map[string]string{AnnotationEIPInstanceID: " eip-1 "}, EIPRequest{Wanted: true, ID: "eip-1", Bandwidth: 5}, ""},
		{map[string]string{AnnotationPodWithEIP: "true", AnnotationEIPBandwidth: "20", AnnotationEIPChargeType: "PayByTraffic",
			AnnotationEIPInternetChargeType: "PayByBandwidth", AnnotationEIPISP: "BGP_PRO", AnnotationEIPBandwidthPackage: "cbwp-1"},
			EIPRequest{Wanted: true, Bandwidth: 20, InternetChargeType: "PayByBandwidth", ISP: "BGP_PRO", BandwidthPackageID: "cbwp-1"}, ""},
		{map[string]string{AnnotationPodWithEIP: "yes please"}, EIPRequest{}, AnnotationPodWithEIP},
		{map[string]string{AnnotationPodWithEIP: "true", AnnotationEIPBandwidth: "0"}, EIPRequest{}, AnnotationEIPBandwidth},
		{map[string]string{AnnotationPodWithEIP: "true", AnnotationEIPInternetChargeType: "Free"}, EIPRequest{}, AnnotationEIPInternetChargeType},
	} {
		got, err := PodEIP(tc.ann)
		switch {
		case tc.errPart != "":
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("%v: err %v, want one naming %s", tc.ann, err, tc.errPart)
			}
		case err != nil || got != tc.want:
			t.Errorf("%v: %+v %v, want %+v", tc.ann, got, err, tc.want)
		}
	}
}
