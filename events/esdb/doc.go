// Package esdb is an [events.Log] on EventStoreDB/KurrentDB, through the
// official Go client (github.com/kurrent-io/KurrentDB-Client-Go, package
// kurrentdb); it is the only package that imports that client. It sits at
// the bottom of the flow, beside events/embedded and events/postgres: the
// node chooses it when Hookline runs as a cluster that shares one log, and
// the server's UI then serves audit.
//
// # Mapping
//
// Streams are the server's streams, named as events/stream.go says; the
// expected revisions map one to one to the client's (Any, NoStream,
// StreamExists, Revision). A [events.Revision] is the server's event
// number; an [events.Position] is the server's $all position. Reads and
// subscriptions from a position start after it. A subscription that drops
// is made again from the last event received (see [Log.Subscribe]).
//
// Events are binary (application/octet-stream); their metadata, Hookline's
// JSON, says "content_type": "application/protobuf". The server's system
// events (stream or type starting with '$') are not part of Hookline's log:
// ReadAll, Subscribe and Head skip them.
//
// # Errors
//
// The client's errors are translated to the sentinels of package events:
// a wrong expected version is a *[events.WrongRevisionError] with the
// stream's actual revision, not found or deleted [events.ErrStreamNotFound],
// the server's size caps [events.ErrTooLarge], a closed client
// [events.ErrClosed]. The server's MaxAppendSize (1 MiB per append by
// default) must be above Config.MaxEventSize; docker/compose.esdb.yaml
// raises it.
//
// # Retention
//
// Event and delivery streams ([events.Expires]) get a $maxAge of
// Config.Retention (30 days), written in their metadata when they are
// created: one extra write per expiring stream. Expired events leave
// stream reads at once, but the disk space comes back, and the events leave
// $all, only when the server scavenges: schedule scavenges.
//
// # Tests
//
// The conformance suite (events/eventstest) runs against a server when
// HOOKLINE_ESDB_URL is set, e.g.
//
//	docker compose -f docker/compose.esdb.yaml up -d
//	HOOKLINE_ESDB_URL='kurrentdb://localhost:2113?tls=false' go test ./events/esdb
//
// and is skipped, saying so, otherwise. The error translation and the
// configuration are tested without a server, against a fake of the
// server's gRPC API on loopback.
//
// The design (appends' positions, retention's trade-offs, the server's UI
// and its standard projections) is in docs/.
package esdb
