// Package scenarios holds the ginkgo suites that run against a live
// cluster (the lab's, or any kubeconfig such as kind's) and the checks
// they share that need no cluster: where a pod's address must live in
// fakecloud's world for the daemon's mode (CheckPodAddresses), and how
// many idle pool addresses a node holds as the world shows them
// (IdleAddresses).
//
// The suites are in the _test files; see README.md for the tiers, the
// environment they read and how to run them.
package scenarios
