// Package nlsafe is how the daemon, the CNI plugin and the lab reach
// netlink in a network namespace: a route socket opened inside the
// namespace given by its file or an ns.NetNS, whose listings retry while
// the kernel reports a dump as interrupted.
//
// A dump is interrupted (NLM_F_DUMP_INTR, netlink.ErrDumpInterrupted)
// when the table changed while it was read: on a node, whenever a CNI ADD
// or DEL runs meanwhile. Acting on a partial listing misses objects or
// misreports them, so every listing is retried. The Handle is a
// netlinksafe.Handle (containernetworking/plugins), which retries the
// listings it wraps — links, routes, rules, qdiscs, filters — and, when
// all its attempts were interrupted, returns the last one's objects with
// a log line. Neighbours and addresses, which it does not wrap on a
// handle, retry here with the same number of attempts and fail with
// ErrDumpInterrupted instead: the earlier copies of this retry all did.
package nlsafe
