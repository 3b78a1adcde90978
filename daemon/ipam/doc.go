// Package ipam manages the node's network resources for pods: the
// shared-ENI address pool of ENIMultiIP mode (MultiIP), whole ENIs of
// ENIOnly mode and exclusive-ENI pods (ENIPool), and node podCIDR
// addresses of VPC mode (PodCIDR, combined with an ENIPool in VPC).
//
// The daemon uses every pool through one interface, Pool; the owner
// bookkeeping they share (who holds or has reserved a resource, sticky
// reservations, the reuse cooldown) is kept once, in holdings. Pools
// reach the cloud through Cloud and VSwitches, interfaces defined here,
// at the consumer: the daemon passes *cloud.Node and *cloud.VSwitchPool,
// and the pool-policy tests (TestPolicy*) an in-memory cloud on a fake
// clock, so batching, inhibits, backoff, reclaim and shrink are tested in
// milliseconds without HTTP.
//
// A pool owns the cloud calls it starts (ops): they outlive the request
// that asked for them — an allocation is finished though the pod gave up
// — but not the pool. Run returns, and Close, only when none is left.
package ipam
