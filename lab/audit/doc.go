// Package audit is the lab's leak audit. It computes, independently of
// the daemons' own reconciliation, what every node should hold from four
// sources and reports every disagreement as a Finding:
//
//   - the cloud: fakecloud's world (GET /fakecloud/world with the admin
//     token): instances, ENIs (status, attachment, tags, addresses),
//     vSwitches;
//   - the API server: pods (not hostNetwork) per spec.nodeName, their
//     phase and status.podIPs; nodes (providerID, podCIDR);
//   - each daemon, asked over its gRPC socket (NodeInput.Socket; read
//     only, nothing is changed): its store's records as of one moment
//     (TerwayRecords.ListRecords, rpc/records.proto): attachments (pod →
//     addresses, ENI IDs, IP type, resources) and intents (cloud calls in
//     flight, e.g. CreateENI), decoded into the audit's own types; and
//     its pool (see below). A daemon that does not answer — stopped,
//     killed, not initialised yet — is a source-error finding for its
//     store and its pool, saying it is unreachable, and the checks that
//     need them are skipped for its node;
//   - each node's network namespace, read through a netlink socket bound
//     to it (nothing is written; no thread changes namespace): links,
//     addresses, rules, routes of all tables, neighbours, qdiscs and
//     ingress filters.
//
// # Idle pool addresses and leaks
//
// The store records only what pods hold (and sticky reservations); idle
// pool addresses are not in it — they live in the daemon's memory, which
// is rebuilt at start by adopting every address of every Secondary ENI
// attached to the instance (ipam Restore) and kept in step by adopting
// unknown addresses seen twice on those ENIs (pool sync). So the store
// cannot tell an idle address from a leak. The daemon's pool can: the
// audit reads it through the daemon's tracing API (GetResourceTrace
// resource_pool, what terway-cli shows), before and after the cloud so
// that a change racing the audit is seen in one of the reads. An address
// on an ENI attached to a lab node is then:
//
//   - held: a live pod's status IP, in any store attachment of the node
//     (sticky reservations and gone pods' records included: the daemon
//     still holds those), or listed by the pool in any state (idle,
//     inuse, reserved, releasing) — not a leak;
//   - in flight: its ENI is not InUse, or the daemon has calls in flight
//     (pool "inflight" > 0, or a store intent for the ENI or an ENI
//     creation) — counted, not judged;
//   - else a leak (KindLeakedIP). Without a pool view, an unheld address
//     the daemon would pool (ENIMultiIP: any address of a Secondary ENI;
//     ENIOnly and VPC: a Secondary ENI's primary) is counted as
//     IdleUnverified with a note instead; addresses the daemon never pools
//     (secondary addresses of the Primary ENI or of trunks, secondary
//     addresses of ENIOnly ENIs) are leaks either way.
//
// IPv6 addresses are listed by the pool through the IPv4 address they are
// paired with, so unheld IPv6 addresses on a Secondary ENI are a leak
// when they outnumber its unheld IPv4 addresses.
//
// # Findings
//
//	source-error        a source could not be read (its checks skipped)
//	leaked-ip           see above
//	missing-ip          a store address the cloud does not have on the
//	                    node's ENIs (VPC mode: outside the node podCIDR)
//	duplicate-ip        two pods hold one address (API server or stores)
//	store-orphan        an attachment whose pod does not exist, has another
//	                    UID, runs elsewhere or finished (a sticky
//	                    reservation within its time is not one)
//	missing-attachment  a running pod of a terway node without attachment
//	ip-mismatch         pod status IPs differ from the store's
//	pool-mismatch       the pool gives a pod an address the store does not
//	                    record for it
//	stale-rule          a per-pod rule (512 "to", 2048 "from", or selecting
//	                    one pod-space address) no live pod of the node
//	                    holds, or whose iif is gone
//	stale-route         a route (any table but local) to a pod-space /32
//	                    (/128) no live pod holds, or via another pod's veth
//	stale-neighbour     a neighbour for such an address on a pod veth, or
//	                    a permanent one anywhere
//	stale-veth          a pod-like host veth (veth_prefix + 11 hex digits,
//	                    or routing a pod address) of no live pod, or a
//	                    retired veth (tzd*, alias terway-retired) not reaped
//	stale-tc            a plugin qdisc or filter on an ENI link in the node,
//	                    or a filter redirecting to a vanished link
//	stale-link          an ENI link the cloud does not attach to the node,
//	                    or one still carrying the "terway-eni:" alias
//	missing-datapath    a running pod lacking its host route (and, in
//	                    ENIMultiIP, its rules 512 and 2048)
//	orphan-eni          a non-primary ENI in a lab vSwitch that is
//	                    Available, untagged (no "creator" nor
//	                    "terway.alibabacloud.com/instance-id" tag), tagged
//	                    for another cluster (Input.ClusterID), or tagged
//	                    for another instance than its attachment
//	unknown-eni         a Secondary ENI InUse on a node that the daemon's
//	                    pool and store do not know (needs the pool)
//	missing-eni-link    an InUse ENI of a node that is no link there and is
//	                    held by no exclusive-ENI pod
//	node-mismatch       a lab node missing from the API server, or whose
//	                    providerID names another instance
//	leaked-eip          an EIP a node's daemon allocated (named
//	                    "terway-<instance ID>") or bound to an address of
//	                    a node's ENI that no attachment of the node
//	                    records (skipped while an allocation is in flight)
//	missing-eip         a recorded EIP the cloud does not have
//	eip-mismatch        a recorded EIP the cloud has unbound, or bound to
//	                    another address than the record's pod's
//	duplicate-eip       one EIP recorded for two pods
//
// "Live pod" means: not hostNetwork, not Succeeded/Failed, scheduled on
// the node; its addresses are its status IPs plus those its (UID-matching,
// not released) attachment records. "Pod space" is the lab vSwitches'
// CIDRs and the nodes' podCIDRs, less gateways and the node's own
// addresses.
//
// The audit is a snapshot: an operation in flight can show for a moment.
// RunUntilClean repeats it until clean or a deadline.
package audit
