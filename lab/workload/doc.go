// Package workload runs a small web workload on a cluster and measures
// what a CNI is judged by: how fast pods become Ready and whether they can
// talk to each other and to a Service.
//
// The workload is a Deployment of busybox httpd pods that answer HTTP on
// port 8080 with their own pod name, behind a ClusterIP Service (port 80),
// in a namespace of its own. Answering with the pod name lets a
// connectivity check tell which pod (or which Service backend) replied,
// with nothing but an exec of wget in another pod.
//
// Parts:
//
//   - Spec and Workload: build, deploy, scale, wait for and delete the
//     workload (Deploy, Scale, WaitReady, WaitGone, Delete).
//   - LatencyRecorder: a pod watch that records, per pod,
//     creationTimestamp → the moment the watch first sees Ready=True, with
//     Summarize for p50/p90/p99.
//   - Executor: exec in a pod through the API server (client-go
//     remotecommand, WebSocket with SPDY fallback, as kubectl does).
//   - Prober: connectivity checks pod → pod on the same node, pod → pod
//     across nodes and pod → Service ClusterIP, each a structured Check.
//   - TerwayConfig: the terway DaemonSet's mode and eni-config's pool
//     bounds, so callers can size and judge a run.
//
// The package works against any cluster whose nodes have the test image
// (lab.local/busybox:1 in the lab, loaded without a registry; pulled
// never by default): it needs no cluster DNS, only pod IPs and Service
// ClusterIPs.
package workload
