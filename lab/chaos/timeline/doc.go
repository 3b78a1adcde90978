// Package timeline records what a running lab does, second by second,
// while a chaos plan runs: the material of the chaos report's timeline
// chart and of the "timeline up to the violation" a failed invariant
// prints.
//
// A Sampler reads, every Interval (one second by default):
//
//   - fakecloud's call counters (admin.Client.Calls), kept as the calls
//     answered since the previous read by outcome ("Success" or the
//     error code the caller got), with the time they span, so that a
//     late tick still gives a true rate; outcomes starting with
//     "Throttling" are also summed as Throttled;
//   - the workload namespace's pods on the API server: Ready (with an
//     IP) against all pods not terminating (lab/workload.Census);
//   - the terway DaemonSet's pods: every increase of a container's
//     restartCount, and every daemon pod that replaces another on its
//     node, is a Restart with its node and the cause the kubelet
//     recorded (the last termination's reason and exit code).
//
// The engine that applies faults hands in a Band for each (name, kind,
// target, start, end), with AddBand or Begin. Stop takes a last sample
// and returns the Timeline. A source that cannot be read in a tick (the
// API server restarting, say) is noted in that Sample's Errors, its
// fields left at zero, and the next read of the calls covers the gap.
//
// The Sampler reads through narrow interfaces: CallCounter (which
// *admin.Client satisfies) and client-go's kubernetes.Interface, so
// tests use an in-process fakecloud and the fake clientset.
package timeline
