package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ErrPodReplaced is returned by PatchPodIPs when the pod of that name is
// no longer the one the addresses were allocated for (another UID).
var ErrPodReplaced = errors.New("the pod was replaced by another of the same name")

// PodIPsValue is the value of AnnotationPodIPs for a pod's addresses:
// IPv4 first, then IPv6, comma-separated ("192.168.0.7,fd00::7"). Invalid
// addresses are left out.
func PodIPsValue(ips ...netip.Addr) string {
	var v4, v6 []string
	for _, ip := range ips {
		switch {
		case !ip.IsValid():
		case ip.Unmap().Is4():
			v4 = append(v4, ip.Unmap().String())
		default:
			v6 = append(v6, ip.String())
		}
	}
	return strings.Join(append(v4, v6...), ",")
}

// PatchPodIPs sets the annotation AnnotationPodIPs of a pod of this node
// to value (PatchPodAnnotation).
func (c *Client) PatchPodIPs(ctx context.Context, namespace, name, uid, value string) (bool, error) {
	return c.PatchPodAnnotation(ctx, namespace, name, uid, AnnotationPodIPs, value)
}

// PatchPodAnnotation sets one annotation of a pod of this node to value
// with a JSON merge patch of metadata.annotations, and nothing else. It
// reports whether it patched: a pod that (in the informer cache) already
// has that value is left alone. uid, when set, names the pod the value is
// for; a cached pod of that name with another UID gives ErrPodReplaced. A
// pod that does not exist gives an error for which IsNotFound is true.
func (c *Client) PatchPodAnnotation(ctx context.Context, namespace, name, uid, key, value string) (bool, error) {
	if p, err := c.pods.Pods(namespace).Get(name); err == nil {
		if uid != "" && string(p.UID) != uid {
			return false, fmt.Errorf("pod %s/%s: %w (UID %s, want %s)", namespace, name, ErrPodReplaced, p.UID, uid)
		}
		if cur, ok := p.Annotations[key]; ok && cur == value {
			return false, nil
		}
	} else if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return false, err
	}
	if _, err := c.cs.Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("annotate pod %s/%s with %s: %w", namespace, name, key, err)
	}
	return true, nil
}
