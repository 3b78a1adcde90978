// Package routectl is the lab's route controller for VPC mode: the job
// Alibaba's cloud-controller-manager does there. For every Node with a
// podCIDR and an Alibaba provider ID ("<region>.<instance-id>") it keeps
// one entry in the VPC's system route table that sends the podCIDR to the
// node's instance, and it removes the entries of nodes that are gone or
// whose podCIDR changed.
//
// It owns only custom entries whose next hop is an instance and whose
// destination lies inside the cluster CIDR; system routes and every other
// entry are left alone. The cloud is reached only through the unmodified
// alibaba-cloud-sdk-go, so the same code drives fakecloud and real VPC.
package routectl
