// Package config parses the node daemon's configuration eni_conf: Terway's
// JSON document, kept in key eni_conf of ConfigMap kube-system/eni-config and
// mounted at /etc/eni/eni_conf (Terway's -config default: /etc/eni/eni.json).
//
// Keys follow Terway's spelling and meaning, so an eni_conf written for Terway
// works here unchanged. Keys this daemon does not implement, and keys nobody
// knows, are accepted and listed in [Config.Ignored] for the daemon to log as
// "accepted and ignored"; they are never an error. Bad values of the keys we
// do implement are errors that name the key:
//
//	eni_conf: max_pool_size: must be >= 0, got -1
//	eni_conf: ip_stack: "ipv6" is not supported (ipv4, dual)
//
// Use [Parse] (or [ParseFile]); for Terway's dynamic per-node configuration
// (node label terway-config=<name> → eni_conf of ConfigMap <name> merged over
// the default) first combine the two documents with [Merge], an RFC 7396 JSON
// Merge Patch — package daemon/dynconfig does both for a node, reading its
// label and the ConfigMap. [Config.Capacity] and [Config.PoolSizes] turn the instance
// type's limits and the pool keys into the numbers the pools use.
//
// # General rules
//
//   - A key set to null or "" is the same as a key left out: its default applies.
//   - Key names match case-insensitively when there is no exact match, as with
//     encoding/json in Terway.
//   - Durations are JSON strings in Go syntax: "500ms", "90s", "10m", "1h".
//     backoff_override also takes integer nanoseconds (Terway's form).
//     Negative durations, and negative counts and sizes, are errors.
//   - "Default" below is what an empty document ({}) yields; see [Defaults].
//
// # Terway keys implemented
//
// Credentials and cloud:
//
//   - version (string, ""): informational.
//   - access_key, access_secret (string, ""): a static AccessKey pair. Empty:
//     credential_path, then the instance's RAM role from the metadata service.
//   - credential_path (string, ""): an encrypted STS token file (Terway's
//     addon token format).
//   - region_id (string, ""): empty means the metadata service's region-id.
//   - resource_group_id (string, ""): resource group of the ENIs created.
//   - security_group (string, ""), security_groups ([]string, none): the
//     security groups of created ENIs, their union at most 10
//     ([Config.SecurityGroupIDs]). None: those of the instance's primary ENI.
//   - vswitches (object zone-id → [vSwitch IDs], none): the vSwitches ENIs are
//     created in; only the entry of the node's zone is used. None: the vSwitch
//     of the instance's primary ENI.
//   - vswitch_selection_policy (string, "random"): how a vSwitch is picked
//     among vswitches[zone]: "random" (shuffled) or "ordered", which means
//     "most free first": the vSwitch with the highest
//     AvailableIpAddressCount first. "most" (Terway's internal name for the
//     same policy) is accepted and read as "ordered".
//   - eni_tags (object, none): tags added to every ENI the daemon creates, next
//     to its own ownership tags (creator=terway, the instance's and the
//     cluster's IDs). The daemon recognises its ENIs by the ownership tags
//     (and eni_tag_filter) alone: changing eni_tags keeps the ENIs created
//     before as its own. An ENI attached to the node without them (a user's,
//     another cluster's or instance's) is never adopted, released or swept.
//   - eni_tag_filter (object, none): when set, only ENIs carrying all these
//     tags are managed; other attached ENIs are left alone: never adopted (at
//     start or by the pool's sync), released, detached or deleted (the orphan
//     sweeps included), and their addresses are never handed to pods. Such
//     an ENI still takes one of the instance's ENI slots: the cloud refuses
//     an attach beyond the instance type's limit and the pool then pauses
//     ENI creation, but the published capacity (max pods) does not subtract
//     it. The ENIs the daemon creates carry these tags next to eni_tags and
//     its ownership tags, so it keeps managing its own; a filter that
//     contradicts those tags is refused at start.
//   - rate_limit (object API name → calls per minute): client-side limits per
//     ECS/VPC API; N allows N/60 calls per second with a burst of N. Entries
//     override the defaults one API at a time; "*" covers every API without an
//     entry; values must be >= 1. Defaults: DescribeNetworkInterfaceAttribute
//     2000, DescribeNetworkInterfaces 800, CreateNetworkInterface 500,
//     AttachNetworkInterface 500, DeleteNetworkInterface 500,
//     DetachNetworkInterface 400, AssignPrivateIpAddresses 400,
//     UnassignPrivateIpAddresses 400, AssignIpv6Addresses 400,
//     UnassignIpv6Addresses 400, DescribeInstanceTypes 400, DescribeVSwitches
//     300, "*" 500 ([cloud.DefaultRateLimits], [Config.RateLimitFor]).
//   - backoff_override (object key → backoff): retry schedules. A backoff is
//     Terway's {"InitialDelay", "Duration", "Factor", "Jitter", "Steps",
//     "Cap"} (field names case-insensitive; durations as integer nanoseconds
//     or duration strings), decoded into a [backoff.Policy]. An entry
//     starts from the built-in schedule of its key (table below;
//     [backoff.Defaults]), so it may set only some fields; Steps must end
//     up >= 1, the others >= 0. A key without a schedule of its own starts
//     from the one of "" ([Config.Backoff] tells which schedule a key
//     gets). InitialDelay is waited once before the first attempt. Unknown
//     fields of an entry land in Ignored.
//
// Built-in backoff schedules (Terway main's, and ours below them):
//
//	key                        InitialDelay  Duration  Factor  Jitter  Steps  Cap
//	"" (everything else)       0             2s        1.5     0.3     6      -
//	eni_create                 0             10s       2       0.3     2      -
//	eni_ops                    0             5s        2       0.3     6      -
//	eni_release                0             4s        2       0.5     8      -
//	eni_ip_ops                 0             5s        1       1.3     6      -
//	eni_delete_confirm         0             2s        1.5     0       4      4s
//	wait_eni_status            0             3s        1.5     0.5     8      -
//	meta_assign_private_ip     0             1.1s      1       0.2     10     -
//	meta_unassign_private_ip   0             1.1s      1       0.2     10     -
//	wait_sts_token_ready       0             1s        1       0.2     60     -
//	metadata                   0             500ms     1.2     0.1     4      -
//	throttled                  0             5s        2       0.5     5      1m
//	kubernetes                 0             200ms     2       0.2     5      -
//	pool_growth                0             5s        2       0       1      1m
//
// Terway main waits an InitialDelay of 1s (eni_delete_confirm) and 3s
// (wait_eni_status) before its first poll; this daemon polls at once, as
// it always has, and takes those delays when backoff_override sets them.
//
// The last four are ours, not Terway's. metadata: the metadata client's
// retries of 429, 5xx and transport errors (Terway main's metadata client
// uses the same). throttled: how long the lab's route controller waits
// after a Throttling answer (the daemon's cloud client slows its rate
// limiter and waits for the next window, see rate_limit and
// throttle_window; a start whose DescribeInstanceTypes is throttled waits
// so too rather than failing). kubernetes: retries of the
// daemon's API server patches (enable_patch_pod_ips). pool_growth: how
// long a pool pauses growing after a failed cloud call: Duration, doubled
// for each failure in a row, up to Cap (the other fields are not used).
// While it lasts, after three calls in a row have failed, waiting pods
// fail at once, so a node recovers from a cloud outage within Cap.
//
// Addresses and routes:
//
//   - ip_stack (string, "ipv4"): "ipv4" or "dual". Anything else, "ipv6"
//     included, is an error.
//   - service_cidr (string, ""): the Service CIDR(s), "<v4>" or "<v4>,<v6>"
//     (either order, one per family), parsed into [Config.ServiceCIDRv4] and
//     [Config.ServiceCIDRv6]. Empty: the daemon reads it from the cluster.
//   - extra_routes ([{"dst": CIDR}], none): more routes put into pods through
//     the pod's gateway.
//
// Pool and capacity:
//
//   - max_pool_size (int >= 0, 0): the most idle IPs (ENIOnly: idle ENIs) the
//     node keeps; the excess goes back to the cloud: a whole idle ENI (detach
//     and delete) when the node keeps min_pool_size without it, else up to
//     ten IPs per Unassign. Terway's chart ships 5.
//   - min_pool_size (int >= 0, 0): the warm pool, idle IPs kept ready.
//   - min_eni (int >= 0, 0): when > 0, min_pool_size becomes min_eni × IPs per
//     ENI (still limited by max_pool_size).
//   - max_eni (int >= 0, 0): when > 0, caps the secondary ENIs the daemon uses.
//   - eni_cap_ratio (number, 1; 0 means 1, negative is an error),
//     eni_cap_shift (int, 0): the
//     secondary ENIs used are int(EniQuantity × eni_cap_ratio) +
//     eni_cap_shift − 1, capped by max_eni ([Config.Capacity]). How the pool
//     keys combine (min_pool_size > max_pool_size lowers min to max, as Terway
//     main does) is told at [Config.PoolSizes].
//   - eni_selection_policy (string, "most_ips"): which ENI gets the next IP:
//     "most_ips" (the fullest ENI first: packs pods so that emptied ENIs can be
//     released whole) or "least_ips" (the emptiest first).
//   - ip_pool_sync_period (duration, "120s"; "0s" means the default): how often
//     the pool is trimmed to max_pool_size, reclaimed and refilled to
//     min_pool_size.
//   - idle_ip_reclaim_after (duration, unset): enables idle IP reclaim; idle IPs
//     above min_pool_size are returned once the pool has not changed for this
//     long (pods took or gave back addresses, or the pool grew; what the
//     reclaim itself returns does not count). Unset or "0s": disabled.
//   - idle_ip_reclaim_interval (duration, "10m"; "0s" means the default): time
//     between two reclaim rounds.
//   - idle_ip_reclaim_batch_size (int, 5; 0 means the default): the most
//     IPs returned per round.
//   - idle_ip_reclaim_jitter_factor (string holding a number >= 0, "0.1"; a
//     bare number is accepted): each wait for the next round is the interval
//     plus a random part of up to this fraction of it (Kubernetes'
//     wait.Jitter), so that nodes that went quiet together do not call the
//     cloud together; 0: exactly the interval.
//
// Kubernetes:
//
//   - custom_stateful_workload_kinds ([]string, none): owner kinds whose pods
//     keep their IP for sticky_time like StatefulSet pods (case-insensitive;
//     [Config.IsStatefulKind]).
//   - kube_client_qps (number >= 0, 0), kube_client_burst (int >= 0, 0): the
//     rate limit of the daemon's Kubernetes client (queries per second and
//     burst, shared by the informer, events, patches); 0 means client-go's
//     default (5 and 10). A QPS without a burst gets a burst of max(10,
//     QPS). The config itself (the node's terway-config label and
//     ConfigMap) is read before, with the defaults.
//   - enable_patch_pod_ips (bool, true): write annotation
//     k8s.aliyun.com/pod-ips, the pod's addresses ("192.168.0.7" or
//     "192.168.0.7,fd00::7"), after AllocIP has answered: a queue keyed by
//     pod, the latest value wins, a pod that already has it is not patched,
//     failures are retried with backoff_override "kubernetes" (200ms × 2
//     per retry up to 3.2s, jitter 0.2) until the pod is gone; the
//     reply never waits for it. Needs RBAC patch on pods.
//   - disable_device_plugin (bool, false): do not register the aliyun/eni
//     device plugin (ENIOnly).
//   - enable_eip_pool ("true"/"false" or bool, false): give a pod annotated
//     k8s.aliyun.com/pod-with-eip (or pod-eip-instanceid) an elastic IP
//     bound to its address (ENIMultiIP and ENIOnly), with Terway's
//     annotations eip-bandwidth (Mbit/s, default 5), eip-charge-type /
//     eip-internet-charge-type, eip-isp, eip-common-bandwidth-package-id;
//     the daemon writes k8s.aliyun.com/allocated-eipAddress. EIPs it
//     allocates are released with the pod (kept while a sticky pod's
//     address is reserved); a user's (pod-eip-instanceid) is only
//     unbound. Needs RAM permissions for the VPC EIP calls.
//   - allow_eip_rob ("true"/"false" or bool, false): a user's EIP bound to
//     something else is unbound from it and bound to the pod; without it
//     such a pod's AllocIP fails.
//
// # Terway keys accepted and ignored
//
// These Terway keys belong to features this daemon does not have (EIP
// migration, trunk and member ENIs, eRDMA, IP prefixes, centralized IPAM,
// warm-up): prefix, enable_eip_migrate, enable_eni_trunking,
// enable_erdma, ipam_type, eni_cap_policy, enable_ip_prefix,
// ipv4_prefix_count, ipv6_prefix_count, ip_warm_up_size, eni_tag_block_list,
// wait_trunk_eni, disable_security_group_check, in_cluster_loadbalance
// ([UnimplementedKeys]). When one is set to anything but null, false, 0, "",
// "false", [] or {} it is listed in Ignored.
//
// # Extensions (keys of ours, not Terway's)
//
//   - endpoint (URL, ""): one http(s) URL serving both the ECS and the VPC API
//     (fakecloud, for instance). Empty: the real cloud's regional endpoints.
//   - ecs_endpoint, vpc_endpoint (URL, ""): per-API override of endpoint
//     ([Config.ECSEndpoint], [Config.VPCEndpoint]).
//   - metadata_endpoint (URL, "http://100.100.100.200"): the instance
//     metadata service.
//   - cluster_id (string, ""): goes into the ownership tags of every ENI the
//     daemon creates, so that orphan sweeps touch only this cluster's ENIs.
//   - gc_period (duration > 0, "5m"): how often store, pods and cloud are
//     reconciled and leaks returned. The first round comes 30s after the
//     daemon has read the API server (gc_period when that is shorter), so
//     that the DELs missed while it was down are made good soon.
//   - pool_heal_period (duration > 0, "10s"): how often the daemon (in
//     ENIMultiIP mode) compares instance metadata with the addresses its
//     pods hold, to heal what an operator changed out of band. A
//     difference is acted on only when the cloud API confirms it, twice
//     in a row: an address unassigned while its ENI is still attached is
//     assigned back to that ENI (the pod keeps it); an address whose ENI
//     was detached or deleted, or that cannot be assigned back, is lost:
//     its pod keeps the claim (the address is never handed to another
//     pod) and is evicted through the Eviction API with a ResourceLost
//     event — a bare pod too, since its network is gone; an ENI of ours
//     detached out of band is deleted once no pod uses it, and an idle
//     one detached or deleted is dropped from the pool at once (not at
//     the next ip_pool_sync_period). Terway has no such key.
//   - cni_gc_grace (duration >= 0, "1m"): CNI GC leaves attachments younger
//     than this alone, since the runtime's list of valid attachments is a
//     snapshot that an ADD finishing after it is missing from.
//   - pool_check_period (duration > 0, "2m"): how often the pool is
//     reconciled.
//   - reuse_cooldown (duration >= 0, "0s"): how long a released IP waits before
//     another pod may get it.
//   - sticky_time (duration >= 0, "5m"): how long the IP of a deleted stateful
//     pod (see custom_stateful_workload_kinds) stays reserved for a pod of the
//     same name; "0s" turns sticky IPs off.
//   - degradation (string, ""): operator switch for a troubled cloud: ""
//     (normal), "no_mutation" (no mutating cloud call at all; pods get only
//     what the pool holds) or "no_release" (allocate, but never unassign,
//     detach or delete).
//   - store_path (path, "/var/lib/cni/terway/ResRelation.db"): the daemon's
//     bbolt store.
//   - socket_path (path, "/var/run/eni/eni.socket"): the gRPC socket the CNI
//     plugin dials.
//   - metadata_lag_timeout (duration > 0, "30s"): how long to wait for the
//     metadata service to show a new ENI or IP before giving up.
//   - ip_batch_window (duration >= 0, "200ms"): how long new demand for
//     addresses, or addresses given back, wait so that a burst of pods
//     starting or going becomes few cloud calls (up to ten addresses each,
//     a new ENI created with all it will carry, a whole idle ENI released);
//     pods an idle address can serve never wait for it; "0s" calls at
//     once.
//   - ip_exhausted_inhibit (duration > 0, "5m"): after the cloud answers
//     that a vSwitch has no address left (InvalidVSwitchId.IpNotEnough,
//     QuotaExceeded.PrivateIpAddress), how long that vSwitch and the ENIs
//     in it are not asked again. The daemon then tries again by itself, so
//     a node recovers without a restart when addresses come back (Terway
//     waits 10m).
//   - eni_limit_inhibit (duration > 0, "1m"): after the cloud answers that
//     the instance holds all the ENIs it can (EniPerInstanceLimitExceeded),
//     how long the pool creates no ENI; an ENI released or adopted lifts
//     the pause at once. The pause after other failures to grow is
//     backoff_override's pool_growth.
//   - throttle_window (duration > 0, "1m"): the cloud's flow-control
//     window. ECS counts calls per API in clock minutes, and an API
//     throttled in minute T can be called again at T+1: a throttled call
//     (ENI creation, address assignment, DescribeInstanceTypes at start)
//     waits until the next window opens, plus up to a sixtieth of it at
//     random, instead of backing off exponentially past it or retrying
//     into refusals. An emulator with other windows sets its own.
//   - vswitch_cache_ttl (duration > 0, "10m"): how long a DescribeVSwitches
//     answer (free address count) is trusted when choosing a vSwitch; an
//     answer of no free address only for 30s (cloud.DryRecheck), so a
//     node sees a refilled vSwitch soon.
//   - not_ready_on_ip_exhaustion (bool, false): make CNI STATUS fail (the
//     runtime then reports the node's network not ready) while the node
//     cannot hand out an address. Off by default: a vSwitch running dry
//     must not make every node on it NotReady; exhaustion is reported by
//     the SufficientIP node condition instead.
//   - cni_conf_dir, cni_bin_dir, cni_cache_dir (paths, "/etc/cni/net.d",
//     "/opt/cni/bin", "/var/lib/cni"): where the daemon's periodic CNI CHECK
//     of running pods finds the network config, the plugin binaries and the
//     runtime's cached ADD results.
//   - cni_state_dir (path, "/var/lib/cni/terway"): the terway plugin's
//     state_dir; set it to the same directory. Its attachment records are
//     one of the sources the daemon restores what every pod holds from
//     (with the API server's pods, the host's per-pod routes and rules, the
//     cloud and the store), so an address configured in a running pod is
//     never handed to another pod, whatever happened to the store.
//   - kube_sync_timeout (duration > 0, "30s"): how long the daemon waits at
//     start for its pod informer to sync. Past it the daemon restores from
//     the local sources and serves; until the API server has been read, no
//     address any source shows as held is released or reused.
package config
