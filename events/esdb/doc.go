// Package esdb is an [events.Log] on EventStoreDB/KurrentDB, through the
// official Go client (github.com/kurrent-io/KurrentDB-Client-Go, package
// kurrentdb); it is the only package that imports that client. It sits at
// the bottom of the flow, beside events/embedded and events/postgres: the
// node chooses it when Hookline runs as a cluster that shares one log, and
// the server's UI then serves audit.
//
// # Mapping
//
// Streams are the server's streams, named as events/stream.go says. An
// append maps its expectation one to one: [events.Any], [events.NoStream],
// [events.StreamExists] and [events.Exact] become the client's Any,
// NoStream, StreamExists and Revision. A [events.Revision] is the server's
// event number; [events.End] is its End. An [events.Position] is the
// server's $all position, Commit and Prepare as the server gives them.
// Reads and subscriptions from a position start after it: where the server
// sends the event at the start position itself, this package drops it.
// Subscriptions that drop are made again from the last event received (see
// [Log.Subscribe]).
//
// An append's result is the server's last event number and the position of
// that event. The server gives no position when an append was idempotent
// and, for several events, the position of the write; in both cases the
// last event is read back for its own position (one extra read).
//
// Events are binary: the server's content type is application/octet-stream
// (the only non-JSON type that the client offers) and the event's metadata,
// Hookline's JSON, carries "content_type": "application/protobuf". Metadata
// bytes are sent as they are.
//
// The log of Hookline is the server's log without its system events: the
// server's and the projections' own, whose stream or type starts with '$'.
// ReadAll, Subscribe and Head skip them.
//
// # Errors
//
// One function, translate, maps the client's *kurrentdb.Error (found with
// errors.As, because the client wraps it) to the sentinels of package
// events: wrong expected version to a *[events.WrongRevisionError] with the
// stream's actual revision, not found or deleted to
// [events.ErrStreamNotFound], the server's append size caps to
// [events.ErrTooLarge], a closed client to [events.ErrClosed]. Sizes are
// checked with [events.CheckAppend] before anything is sent; the server's
// own cap (MaxAppendSize, 1 MiB per append by default, counting the event
// type too) must be above Config.MaxEventSize, and docker/compose.esdb.yaml
// raises it.
//
// # Retention
//
// Event and delivery streams ([events.Expires]) get a $maxAge of
// Config.Retention (30 days) in their stream metadata, written when such a
// stream is created: before an append that expects NoStream (how the
// publish handler creates event streams and how a delivery's first event is
// written) or Any. The metadata write expects the metadata stream not to
// exist, so it happens once per stream; later attempts fail on the server
// and are ignored. It comes before the append so that a crash between the
// two leaves at worst metadata for a stream that was never written, never
// an event that would be kept forever.
//
// The cost is one extra write, and one extra round trip, per expiring
// stream, so publishing costs two writes instead of one. The server has no
// retention per category or for the whole database that would avoid it
// ($settings holds only default ACLs), and a sweeper that deletes old
// streams would have to list them, which the server cannot do cheaply.
// $maxAge hides expired events from stream reads at once; the disk space
// comes back, and the events leave $all, only when the server scavenges, so
// operators must schedule scavenges.
//
// # The UI
//
// Stream names follow the category-id convention, so with the standard
// projections running (KURRENTDB_RUN_PROJECTIONS=All and
// KURRENTDB_START_STANDARD_PROJECTIONS=true, as in
// docker/compose.esdb.yaml) the UI shows $ce-endpoint (every endpoint's
// events), $ce-delivery, $et-AttemptFailed (every failed attempt) and so
// on. Without them those streams do not exist; Hookline itself never reads
// them.
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
package esdb
