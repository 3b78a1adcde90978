// Package daemon is terwayd as a library: it gets ENIs and addresses from
// the cloud, keeps the pools, persists what every pod holds, reconciles
// store, pods and cloud, and serves the CNI plugin over gRPC on a unix
// socket. Many daemons can live in one process (tests, the fleet
// simulation): a Daemon takes everything it uses from Options — clock,
// logger, Prometheus registerer, paths, Kubernetes client, the host
// network namespace — and nothing from process globals.
//
// The pieces, each in its own package:
//   - cloud: ECS/VPC through the unmodified Aliyun SDK (rate limits, one
//     backoff, ClientTokens persisted before mutating calls, degradation
//     switches), the metadata service, credentials, the ENI lifecycle and
//     vSwitch choice.
//   - ipam: the pools behind one Pool interface the daemon calls — MultiIP
//     (ENIMultiIP), ENIPool (ENIOnly), VPC (PodCIDR plus an ENIPool for
//     exclusive ENIs) — over a narrow Cloud interface (*cloud.Node).
//   - store: the bbolt store of attachments, pods and call intents.
//   - k8s: the node's pods (an informer), events, node annotation and
//     condition.
//   - config: eni_conf. backoff: the named backoff policies.
//   - dynconfig: the configuration a Daemon is given, as terwayd, the bench
//     and the lab build it: the base eni_conf with the node's dynamic
//     config (label terway-config → ConfigMap) merged over it.
//   - hostnet: host rules and routes of released pod addresses.
//   - deviceplugin: the aliyun/eni kubelet device plugin.
//   - cnicheck: CNI CHECK of running pods through libcni.
//
// The gRPC API it serves (Terway's TerwayBackend and TerwayTracing, plus
// Status and GarbageCollect for CNI STATUS and GC) is the top-level
// package rpc, which the plugin imports without importing the daemon.
//
// At start the daemon maps eni_conf and the instance's facts onto the
// pools' configurations in one pure function (newPoolConfigs,
// poolconfig.go), then builds the pools of its mode.
//
// A Daemon runs five loops besides gRPC: the pool's own (demand-driven
// growth, warm-up, shrink, idle reclaim, sync with metadata), the heal
// (heal.go, pool_heal_period: what an operator changed out of band under
// running pods, confirmed with the cloud, is assigned back, or the pod is
// evicted with its claim kept), GC (gc_period: store ↔ pods ↔ pool ↔
// cloud, orphan sweep, host cleanup), the periodic check
// (Options.CheckPeriod: the three-way mapping and CNI CHECK,
// ResourceInvalid events) and publishing capacity (node annotation once
// a minute; the SufficientIP condition within 10s of a change). With enable_patch_pod_ips, workers
// of a queue keyed by pod also write each pod's addresses into its
// annotation k8s.aliyun.com/pod-ips after AllocIP has answered (never on
// the reply path; retried; read back when the daemon restores).
//
// Lifetimes are owned, as with controller-runtime's Runnable: New
// prepares, Serve(ctx) runs until ctx ends and returns only when every
// goroutine the daemon started has stopped and the store and the node
// lock are closed, so an embedder needs no goroutine of its own to close
// it. Work that must not die with the request that started it — an
// allocation the plugin gave up on, the pools' cloud calls — is detached
// from the request but not from the daemon: it is cancelled when the
// daemon stops, and Serve waits for it (a creation cancelled half-way
// still rolls back what it made). Close stops a daemon that never served.
//
// Before it serves, the daemon restores what every pod holds (restore.go)
// from the cloud and the store and from the node's truth, which survives
// the store: the API server's pods, the plugin's attachment records and
// the host's per-pod routes. An address any source shows configured in a
// running pod stays held (a live pod's word beats the store; an address
// no pod can be named for is held under a placeholder until no source
// shows it), so a lost, empty, older or foreign store never makes the
// daemon hand an address to a second pod or return it to the cloud. GC
// releases nothing until the API server has been read; its first round
// comes soon after that (firstGCDelay), not a whole gc_period later.
//
// What the daemon refuses: a socket_path holding anything but a stale
// socket (a file, a directory, a symlink: not ours to delete), and an
// AllocIP whose container ID is empty or not CNI's form (a letter or
// digit, then letters, digits, '_', '.', '-'; at most MaxContainerIDLen
// bytes) — InvalidArgument, nothing stored.
package daemon
