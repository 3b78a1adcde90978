// Package cni is the Terway-style CNI plugin: the `terway` binary that a
// container runtime runs for every pod interface. It asks terwayd (the
// node daemon, package daemon) for the pod's address over gRPC on a unix
// socket and builds the pod's network with package cni/datapath.
//
// # Verbs
//
// Spec versions 0.3.1, 0.4.0, 1.0.0 and 1.1.0, standalone or in a
// conflist; results are converted to the config's cniVersion.
//
//   - ADD: CNI_NETNS must be a network namespace (else code 8; a path
//     that does not exist fails in Setup) → per-container lock → AllocIP
//     → pick the datapath from the reply's IPType (TypeENIMultiIP →
//     PolicyRoute, or IPVlan with eniip_virtual_type IPVlan on a kernel
//     that has ipvlan (probed in the pod's namespace); TypeVPCENI →
//     ExclusiveENI, or VLAN when ENIInfo names a trunk member (Trunk,
//     Vid); TypeVPCIP → VPCRoute; IPVlan on a kernel without it and
//     datapathv2 fall back to PolicyRoute with a VirtualModeChanged pod
//     event, there being no eBPF datapath here; VLAN never falls back: on
//     a kernel without 802.1Q the ADD fails, naming it, with a
//     VLANUnsupported pod event) → write the state file → datapath.Setup under the
//     datapath locks → result. A failure after AllocIP tears down,
//     releases the address ("roll back ip for error: …") and removes the
//     state file.
//   - DEL: idempotent. Teardown from the state file (else the daemon's
//     record via GetIPInfo, else, with the daemon down, prevResult), then
//     ReleaseIP ("normal release"), then the state file goes. An empty or
//     vanished netns, a daemon that is down, late or "already processing"
//     do not fail it: the daemon's GC reclaims what a DEL could not. A
//     netns that is a namespace of another kind (recorded by an older
//     version's ADD) counts as gone: DEL and GC clean the node side only.
//     The host veth is retired (down, renamed with datapath.ReapPrefix)
//     rather than deleted, because a link deletion waits for the kernel's
//     RCU grace periods; a detached `terway reap-links` child deletes it
//     once the DEL has answered (the runtime's removal of the pod
//     namespace, the next DEL and GC delete retired veths too).
//   - CHECK: the state file must exist (else code 3), prevResult and the
//     daemon's record (GetIPInfo, skipped when unreachable) must name the
//     same addresses, and datapath.Check must find every object.
//   - GC: tears down every attachment whose state file is not in
//     cni.dev/valid-attachments and deletes retired host veths, then the
//     daemon's GarbageCollect releases the rest.
//   - STATUS: the daemon's Status: unreachable or not ready → code 50.
//
// # Network configuration
//
// Standard keys: cniVersion, name, type, capabilities, runtimeConfig,
// args, prevResult, ipam and dns (ipam is ignored), and the runtime's
// cni.dev/ keys. Terway's keys: eniip_virtual_type (Veth | IPVlan |
// datapathv2, any case; default Veth), host_stack_cidrs, disable_host_peer,
// mtu (default 1500, 1280..65535), veth_prefix (default "cali", at most 4
// characters), debug (log level Debug). Terway keys accepted and ignored
// with a log line: vlan_strip_type, ip_stack, bandwidth_mode,
// enable_network_priority, symmetric_routing_config,
// network_policy_provider, cilium_args, auto_mtu, trunk_on, enable_ebpf.
// This plugin's keys: socket_path (default /var/run/eni/eni.socket),
// state_dir (default /var/lib/cni/terway), log_file (default: stderr;
// never stdout, which carries the result). Any other key is an error.
//
// # State
//
// state_dir holds <containerID>-<ifname>.json per attachment (the
// datapath.Spec and the pod's identity; 0600, written atomically but not
// fsynced, since what it describes does not outlive a node crash; dir
// 0700), written before Setup, so DEL and GC can undo an attachment
// without the daemon; <containerID>.container.lock serialises the
// invocations of one container. The datapath work of PolicyRoute and
// VPCRoute pods, whose node-side objects are the pod's own or shared ones
// that concurrent setups converge on, holds datapath.lock shared, then
// <hostVeth>.veth.lock and <address>.addr.lock of each address exclusive
// (every sandbox of a pod has the same host veth; a late DEL of the pod
// that had an address meets the ADD of the pod that has it now on the
// address; a teardown removes them): the pods of a node set up at once,
// but one pod's old and new sandbox never do, nor two pods of one address. IPVlan and ExclusiveENI hold
// datapath.lock exclusive, as Terway's plugin does for every kind. Both
// wait 11 s at most, like Terway's, on a blocking flock handed to the next
// waiter as soon as it is free, where Terway polls every 200 ms. The
// daemon calls stay outside the datapath locks.
//
// # Timeout chain
//
// Connecting to the socket takes at most ConnectTimeout (5 s), the gRPC
// handshake included, so a socket that accepts but never answers fails
// the call (code 11; DEL and GC go on without the daemon) after 5 s; an
// invocation's work at most Timeout (45 s), and the rollback of a failed
// ADD at most 10 s more, so the plugin answers within 55 s: under CRI-O's
// 60 s and kubelet's 2-minute runtimeRequestTimeout. The daemon caps each
// RPC at 118 s and finishes an allocation whose caller gave up, so the
// runtime's retry of the ADD gets the same address at once. STATUS takes
// at most 4 s (kubelet asks every 5 s).
//
// # Errors
//
// JSON {cniVersion, code, msg} on stdout, exit status 1:
//
//	1   unsupported cniVersion (also CHECK before 0.4.0, GC/STATUS before 1.1.0)
//	2   unknown config key (the message names the key and its value)
//	3   CHECK of a container without state, or one the daemon no longer holds
//	4   missing CNI_* variable; CNI_ARGS malformed, with unknown keys
//	    without IgnoreUnknown=1, or (ADD) without the pod's name
//	5   I/O: state dir, log file
//	6   stdin is not JSON
//	7   invalid config value (eniip_virtual_type, host_stack_cidrs, mtu,
//	    veth_prefix, relative paths, prevResult)
//	8   ADD: CNI_NETNS exists but is no network namespace (a namespace
//	    file of another kind, e.g. UTS, or a plain file), refused before
//	    AllocIP and before anything is written
//	11  try again later: daemon unreachable (the message names the
//	    socket), gRPC Unavailable, ResourceExhausted (no address now),
//	    DeadlineExceeded, NotFound, "already processing", a lock held too
//	    long; GC with the daemon unreachable
//	50  STATUS: daemon unreachable or not ready (its reason)
//	999 anything else: a datapath failure or CHECK mismatch (naming the
//	    object), another daemon error
package cni
