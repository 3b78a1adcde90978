package datapath

// VPCRoute (VPC mode): the pod's address comes from the node's podCIDR,
// which the VPC route table sends to the node, so the node only needs a
// route to the pod's /32 through its veth. No policy rules, no ENI.

// vpcRouteObjects is the whole VPCRoute datapath.
func (e *env) vpcRouteObjects(v vethPair) []object {
	objs := e.podVethObjects(v)
	objs = append(objs, e.hostVethObjects(v)...)
	return append(objs, e.bandwidthObjects(v)...)
}

func (e *env) setupVPCRoute() (*built, error) {
	v, err := e.ensureVeth(e.s.HostVeth, e.s.IfName)
	if err != nil {
		return nil, err
	}
	return &built{veth: v, objects: e.vpcRouteObjects(v)}, nil
}

func (e *env) checkVPCRoute() (*built, error) {
	v, err := e.requireVeth(e.s.HostVeth, e.s.IfName)
	if err != nil {
		return nil, err
	}
	return &built{veth: v, objects: e.vpcRouteObjects(v)}, nil
}
