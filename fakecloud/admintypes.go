package fakecloud

import "github.com/terway-sim/terway/fakecloud/admin"

// The types the admin API exchanges live in package admin, so that a
// program that only reads or steers a fakecloud over HTTP does not link
// the emulator. The Go API answers with the same types; these aliases let
// its users name them from this package.
type (
	// Duration is a time.Duration written as a Go duration string.
	Duration = admin.Duration
	// WorldView is the admin view of the whole world.
	WorldView = admin.WorldView
	// InstanceInfo describes an instance and its attached ENIs.
	InstanceInfo = admin.InstanceInfo
	// ENIInfo describes an ENI as a hypervisor plugs it in.
	ENIInfo = admin.ENIInfo
	// ENIView is an ENI with its status and attachment.
	ENIView = admin.ENIView
	// VSwitchView is a vSwitch with its free address count.
	VSwitchView = admin.VSwitchView
	// RouteTableInfo is a VPC route table with its custom entries.
	RouteTableInfo = admin.RouteTableInfo
	// RouteInfo is one route entry.
	RouteInfo = admin.RouteInfo
	// EIPView is an elastic IP address and what it is bound to.
	EIPView = admin.EIPView
	// EIPInfo is admin.EIPInfo.
	EIPInfo = admin.EIPInfo
	// Fault is one injected misbehaviour.
	Fault = admin.Fault
	// FaultStatus is an installed fault and how many calls it holds.
	FaultStatus = admin.FaultStatus
	// CallStat counts calls of one action by one caller with one outcome.
	CallStat = admin.CallStat
	// Settings are the behaviour knobs.
	Settings = admin.Settings
)

// ENI statuses as ECS reports them.
const (
	ENIAvailable = admin.ENIAvailable
	ENIAttaching = admin.ENIAttaching
	ENIInUse     = admin.ENIInUse
	ENIDetaching = admin.ENIDetaching
	ENIDeleting  = admin.ENIDeleting
)

// ENI types.
const (
	ENITypePrimary   = admin.ENITypePrimary
	ENITypeSecondary = admin.ENITypeSecondary
	ENITypeTrunk     = admin.ENITypeTrunk
)

// Instance statuses.
const (
	StatusRunning = admin.StatusRunning
	StatusStopped = admin.StatusStopped
)

// EIP statuses.
const (
	EIPAvailable     = admin.EIPAvailable
	EIPAssociating   = admin.EIPAssociating
	EIPInUse         = admin.EIPInUse
	EIPUnassociating = admin.EIPUnassociating
	EIPReleasing     = admin.EIPReleasing
)

// Fault kinds and pause steps (see admin.Fault).
const (
	FaultError        = admin.FaultError
	FaultLatency      = admin.FaultLatency
	FaultLostResponse = admin.FaultLostResponse
	FaultPause        = admin.FaultPause
	FaultConsistency  = admin.FaultConsistency
	FaultStale        = admin.FaultStale
	StepBefore        = admin.StepBefore
	StepAfter         = admin.StepAfter
)

// Services a fault applies to (see admin.Fault).
const (
	ServiceAPI      = admin.ServiceAPI
	ServiceMetadata = admin.ServiceMetadata
)

// Call outcomes (see admin.CallStat).
const (
	OutcomeSuccess    = admin.OutcomeSuccess
	OutcomeStale      = admin.OutcomeStale
	OutcomeClientGone = admin.OutcomeClientGone
)
