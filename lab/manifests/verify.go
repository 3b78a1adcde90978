package manifests

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// verify checks that the rendered objects carry p: kustomize applies an
// image override or a JSON patch to nothing without complaint when deploy/
// no longer has what it targets.
func (p Params) verify(objs []*unstructured.Unstructured) error {
	var ds appsv1.DaemonSet
	if err := find(objs, "DaemonSet", DaemonSetName, &ds); err != nil {
		return err
	}
	pod := ds.Spec.Template.Spec
	var errs []error
	for _, name := range []string{InstallContainer, DaemonContainer} {
		c := containerNamed(pod, name)
		if c == nil {
			errs = append(errs, fmt.Errorf("DaemonSet %s has no container %s", DaemonSetName, name))
			continue
		}
		if c.Image != p.Image {
			errs = append(errs, fmt.Errorf("container %s: image %s, want %s", name, c.Image, p.Image))
		}
	}
	if len(pod.Containers) == 0 || pod.Containers[0].Name != DaemonContainer {
		errs = append(errs, fmt.Errorf("container %s must come first (its args/0 is patched with the mode)", DaemonContainer))
	} else if modes := flagValues(pod.Containers[0].Args, modeFlag); !slices.Equal(modes, []string{string(p.Mode)}) {
		errs = append(errs, fmt.Errorf("container %s: %s%v, want exactly one %s%s (args %q)",
			DaemonContainer, modeFlag, modes, modeFlag, p.Mode, pod.Containers[0].Args))
	}
	if len(p.ENIConf) > 0 || len(p.CNIConf) > 0 {
		var cm corev1.ConfigMap
		if err := find(objs, "ConfigMap", ConfigMapName, &cm); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if len(p.ENIConf) > 0 && cm.Data["eni_conf"] != string(p.ENIConf) {
			errs = append(errs, fmt.Errorf("ConfigMap %s: eni_conf is not the one given", ConfigMapName))
		}
		if len(p.CNIConf) > 0 && cm.Data["10-terway.conf"] != string(p.CNIConf) {
			errs = append(errs, fmt.Errorf("ConfigMap %s: 10-terway.conf is not the one given", ConfigMapName))
		}
	}
	return errors.Join(errs...)
}

// find decodes the object of this kind and name in Namespace into out.
func find(objs []*unstructured.Unstructured, kind, name string, out any) error {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name && o.GetNamespace() == Namespace {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				return fmt.Errorf("decode %s %s/%s: %w", kind, Namespace, name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("no %s %s/%s", kind, Namespace, name)
}

// containerNamed returns the pod's container or init container of that
// name.
func containerNamed(pod corev1.PodSpec, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// flagValues returns the values of every "--flag=value" argument.
func flagValues(args []string, prefix string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			out = append(out, v)
		}
	}
	return out
}
