// Package cluster runs the lab's Kubernetes cluster on this machine, with
// fakecloud where production has Alibaba Cloud.
//
// A Supervisor (what `terway-lab up` leaves running) owns a lab: fakecloud
// and the VPC fabric (package lab/fabric) live in its process; etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler run on
// 127.0.0.1; every running instance of the emulated world becomes a node:
// its network namespace from the fabric (ENIs are real interfaces there),
// a private mount namespace in which the standard paths (nodePaths) are the
// node's own directories under its Root, a cgroup root, and containerd,
// kubelet and kube-proxy inside both namespaces. Relays carry the node's
// API server traffic and the API server's kubelet traffic over loopback.
// Terway is applied from deploy/ (package lab/manifests); in VPC mode a
// route controller (lab/routectl) programs the VPC route table. Without a
// world file the world is fakecloud's default topology with a second,
// "pod" vSwitch in each zone that the base eni_conf leaves out, for a
// node's dynamic config to move its ENIs to.
//
// Once the lab is ready, the supervisor serves its control socket
// (control.sock in the lab's directory; HTTP/JSON, root only; the client
// is Control): node lifecycle as the cloud and an operator would do it
// — stop (a power-off: processes killed, instance stopped, ENIs
// unplugged, the node namespace, its cgroups and /run cleared as by a reboot, disks
// kept), start, release (instance, Node object and disks gone), add (a
// new instance joins) and remove (cordon, drain, release) — and SIGKILL
// of a component: containerd, kubelet or kube-apiserver, started again
// after a downtime, or terwayd, which the kubelet restarts. Exits the
// supervisor causes are expected; any other exit of a child is a failure.
// The state file holds a second AccessKey, the operator's, for
// out-of-band actions through the ordinary API.
//
// The State file (lab.json in the lab's directory) describes a running lab
// for status, env, audit and down. Down works from what is still there, so
// it is idempotent and cleans up after a crashed supervisor: processes by
// pid file, network namespace, mount namespace and cgroup; the fabric's
// namespaces; cgroups; mounts under the lab directory; the mount points up
// created on the machine.
package cluster
