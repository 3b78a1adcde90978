package cni

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// PodID identifies the pod of an invocation, from CNI_ARGS.
type PodID struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// InfraContainerID is the sandbox's container ID.
	InfraContainerID string `json:"infraContainerID"`
}

// Known reports whether the pod's namespace and name are set.
func (p PodID) Known() bool { return p.Namespace != "" && p.Name != "" }

func (p PodID) String() string { return p.Namespace + "/" + p.Name }

// k8sArgs are the CNI_ARGS keys kubelet's runtimes send (containerd:
// IgnoreUnknown=1;K8S_POD_NAMESPACE=…;K8S_POD_NAME=…;
// K8S_POD_INFRA_CONTAINER_ID=…;K8S_POD_UID=…). The field names are the
// keys, as types.LoadArgs requires.
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString
	K8S_POD_NAME               types.UnmarshallableString
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString
	K8S_POD_UID                types.UnmarshallableString
}

// parsePodID reads the pod from CNI_ARGS; the infra container ID falls
// back to CNI_CONTAINERID. Unknown keys are an error unless
// IgnoreUnknown=1, as the CNI conventions ask.
func parsePodID(cniArgs, containerID string) (PodID, error) {
	var a k8sArgs
	if err := types.LoadArgs(cniArgs, &a); err != nil {
		return PodID{}, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: %v", err), "")
	}
	p := PodID{
		Namespace:        string(a.K8S_POD_NAMESPACE),
		Name:             string(a.K8S_POD_NAME),
		InfraContainerID: string(a.K8S_POD_INFRA_CONTAINER_ID),
	}
	if p.InfraContainerID == "" {
		p.InfraContainerID = containerID
	}
	return p, nil
}
