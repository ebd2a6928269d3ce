// Package proto holds Hookline's protobuf sources; the Go generated from them
// lives under proto/gen and is committed, never edited by hand:
//
//	proto/gen/hookline/v1            hookline/v1/events.proto and records.proto
//	                                 (package hooklinev1): the events of the
//	                                 log and the projections' records
//	proto/gen/hookline/v1/controlv1  hookline/v1/control.proto, console.proto
//	                                 and reconcile.proto: the public control
//	                                 API (gRPC, REST gateway), which the client
//	                                 package imports
//	proto/gen/hookline/internalv1    hookline/internal/v1/grains.proto and
//	                                 cluster.proto: the messages between the
//	                                 control API, the grains and the nodes;
//	                                 never part of the public API
//
// Run `go generate ./proto` after changing a .proto file or gateway.yaml. It
// needs protoc (Debian's protobuf-compiler) and installs the pinned plugins
// into .bin/.
package proto

import _ "embed"

//go:generate bash generate.sh

// OpenAPI is the OpenAPI (Swagger 2.0) document of the REST API, generated
// from control.proto, console.proto, reconcile.proto and gateway.yaml.
//
//go:embed gen/hookline.swagger.json
var OpenAPI []byte
