// Package rpc is the wire contract between the node daemon and the CNI
// plugin: the gRPC services TerwayBackend (for the plugin) and
// TerwayTracing (for terway-cli), wire-compatible with Terway's, and
// the status details the daemon adds to its errors (details.proto: ours,
// not Terway's, always sent beside the code and text Terway's plugin
// reads, e.g. PodBusyError). TerwayRecords (records.proto, ours too, on
// the same socket) answers the daemon's store records read-only, for the
// lab's audit.
//
// It sits at the top level, not under daemon/, so that the plugin
// depends on the contract alone and never on the daemon (Terway keeps
// its rpc package at the top level too). The proto package is `rpc`;
// service, message and field names and numbers are Terway's and never
// change (TestWireDescriptorsUnchanged holds them to golden files).
//
// The Go code is generated from the .proto files and committed; `make
// proto` regenerates it (needs protoc and the plugins of `make
// proto-tools`).
package rpc

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative rpc.proto tracing.proto details.proto records.proto
