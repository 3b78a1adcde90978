// Package nlsafe is how the daemon, the CNI plugin and the lab reach
// netlink in a network namespace: a route socket opened inside the
// namespace given by its file or an ns.NetNS, whose listings retry while
// the kernel reports a dump as interrupted.
//
// A dump is interrupted (NLM_F_DUMP_INTR, netlink.ErrDumpInterrupted)
// when the table changed while it was read: on a node, whenever a CNI ADD
// or DEL runs meanwhile. A partial listing misses objects, so every
// listing the tree uses is retried, and one interrupted on every attempt
// fails with ErrDumpInterrupted rather than return what it got. That is
// why this is not containernetworking/plugins' netlinksafe: after its
// attempts netlinksafe returns the partial listing with a nil error (and
// a line on the standard logger), and the daemon's GC keeps every address
// held only when the host's listing fails — a partial one taken for
// complete would let it release the address of a live pod.
package nlsafe
