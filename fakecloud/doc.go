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
// consistency after Create, and deterministic, seeded fault injection on
// the API and on the metadata service (errors, latency, hangs, lost
// answers, stale metadata). An admin API steers a running world for chaos
// testing: faults, settings (throttle budgets, delays), instance
// lifecycle and vSwitch drains that exhaust a vSwitch until refilled. A
// Hypervisor hook lets a lab turn attached ENIs into real interfaces. See
// README.md for the full reference.
//
// The package has two layers. The model, the world type (world*.go), is
// the state with its indexes and invariants, persistence, the pending
// halves of asynchronous operations and the hypervisor events: its
// methods take decoded requests and return copies of records. The API
// layer serves HTTP: it authenticates, throttles, injects faults and
// counts calls (exchange.go, call.go), and each action (api_*.go) decodes
// and checks its request, makes one world call and renders the answer.
// The admin and metadata routes work the same way. TestWorldStaysTheModel
// keeps the world from reaching into the API layer.
//
// A program that only reads or steers a fakecloud over HTTP uses package
// fakecloud/admin, which holds the admin client and the types the admin
// API exchanges, and does not link the emulator.
package fakecloud
