// Package rpc is the node daemon's gRPC API (TerwayBackend for the CNI
// plugin, TerwayTracing for terway-cli), wire-compatible with Terway's.
// The Go code is generated from rpc.proto and tracing.proto and committed;
// `make proto` regenerates it (needs protoc and the plugins of `make
// proto-tools`).
package rpc

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative rpc.proto tracing.proto
