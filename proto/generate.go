// Package proto holds Hookline's protobuf sources; the Go generated from them
// lives under proto/gen and is committed. Run `go generate ./proto` to rebuild
// it after changing a .proto file (it needs protoc, Debian's
// protobuf-compiler, and installs the pinned plugins into .bin/).
package proto

//go:generate bash generate.sh
