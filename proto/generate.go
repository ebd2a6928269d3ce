// Package proto holds Hookline's protobuf sources; the Go generated from them
// lives under proto/gen and is committed, never edited by hand:
//
//	proto/gen/hookline/v1            events.proto (package hooklinev1): the
//	                                 events of the log, imported by events
//	proto/gen/hookline/v1/controlv1  control.proto, reconcile.proto,
//	                                 grains.proto and cluster.proto: the
//	                                 control API (gRPC, REST gateway), the
//	                                 grains' and the nodes' messages
//
// Run `go generate ./proto` after changing a .proto file or gateway.yaml. It
// needs protoc (Debian's protobuf-compiler) and installs the pinned plugins
// into .bin/.
package proto

import _ "embed"

//go:generate bash generate.sh

// OpenAPI is the OpenAPI (Swagger 2.0) document of the REST API, generated
// from control.proto, reconcile.proto and gateway.yaml.
//
//go:embed gen/hookline.swagger.json
var OpenAPI []byte
