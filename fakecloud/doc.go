// Package fakecloud emulates one Alibaba Cloud account in one region for
// tests, labs and benchmarks: the ECS (2014-05-26) and VPC (2016-04-28)
// RPC APIs used by ENI-based container networks, the instance metadata
// service and RAM-role STS credentials, served over http.Handler so that
// the unmodified Aliyun SDKs can talk to it.
//
// A Cloud holds the world (instances, ENIs, vSwitches, route tables,
// EIPs) and models what real clients depend on: asynchronous attach and
// detach, per-instance-type quotas, vSwitch exhaustion, ClientToken
// idempotency, per-minute throttling, metadata lag, opt-in eventual
// consistency after Create, and deterministic fault injection. A
// Hypervisor hook lets a lab turn attached ENIs into real interfaces. See
// README.md for the full reference.
package fakecloud
