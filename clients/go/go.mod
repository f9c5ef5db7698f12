// The hilo Go client. Import it as
//
//	import hilo "github.com/hilo-id/hilo/clients/go"
//
// It needs the package generated from proto/hilo/v1/hilo.proto,
// github.com/hilo-id/hilo/gen/go/hilo/v1, which is never committed:
// scripts/gen-stubs.sh writes it (README.md in this folder says how a module
// build finds it). hilo's own build and tests use GOPATH mode against
// Debian's Go packages, offline; the versions below are Debian 12's.
module github.com/hilo-id/hilo/clients/go

go 1.19

require (
	github.com/google/uuid v1.3.0
	github.com/hilo-id/hilo/gen/go v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
