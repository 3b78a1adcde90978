// Package e2e proves the terway CNI plugin on node namespaces and the VPC
// fabric: fakecloud in process with the lab's fabric as its hypervisor,
// one real terwayd per node running in the test process as a library
// (with a fake Kubernetes clientset, its host namespace and metadata
// traffic in the node's namespace), and the plugin binary run as a process
// through libcni from inside the node's namespace, the way containerd runs
// it. It holds tests and benchmarks only.
package e2e
