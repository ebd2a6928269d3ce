// Package embedded is Hookline's default events.Log: a durable log for one
// node, in its data directory, on Pebble (github.com/cockroachdb/pebble/v2).
// It sits under everything that reads or writes events (the control API's
// publish, the grains, the projections) and imports only events and Pebble.
//
// # Key layout
//
// One Pebble keyspace, one-byte prefixes:
//
//	l seq(8, big-endian)                  -> record: stream, revision, id,
//	                                         recorded time, type, metadata, data
//	s uvarint(len) stream revision(8)     -> seq(8) id(16): the stream index
//	h stream                              -> last revision(8) last write(8)
//	t last-write(8) stream                -> (empty): expiring streams by age
//	m seq                                 -> the last sequence number assigned
//
// The global log is ordered by seq, assigned by the single writer goroutine
// in commit order, starting at 1; a record's events.Position has Commit =
// Prepare = seq, so events.Start (0) comes before every event and positions
// grow with commit order. Reading a stream walks its index and fetches each
// record by seq; reading or subscribing to the log walks the l keys.
// Retention (see [Log.Retain]) deletes whole event and delivery streams, so
// readers of the global log see gaps in the sequence numbers; they are
// skipped like any other missing key, and subscriptions do not stall on them.
// The sequence numbers of acknowledged appends are never reused: m seq
// survives the deletion of the newest events.
//
// # Group commit and durability
//
// Appends are handed to one writer goroutine. It takes every append waiting
// at that moment as a group, checks each expected revision in order against
// the store as modified by the group's earlier appends (a Pebble indexed
// batch), stages the appends that hold in one batch together with their
// index entries, heads, time keys and the new last seq, commits the batch
// with pebble.Sync (one fsync of the WAL for the whole group) and only then
// answers the callers. An append that fails its expectation writes nothing
// and does not affect the others in its group. Since a Pebble batch is
// applied atomically and durably from its WAL record, a crash (kill -9 or
// power loss) at any moment leaves either the whole group or none of it: an
// append is never half there, an acknowledged append is always there, and
// the index, heads and last seq always agree with the records. The only
// in-memory state, the last seq, is rebuilt on Open from the m key and the
// last l key. Pebble calls its logger's Fatalf on failures after which going
// on could lose data (a failed WAL sync); it then logs and exits the process,
// as Pebble's own default logger does.
//
// Pebble makes a batch visible to readers before its WAL sync ends, so a
// reader could see a group that a power cut then takes back, and whose
// sequence numbers the next appends reuse. Reads therefore stop at the last
// seq the writer stored, which it stores only once the group's commit has
// returned: Head, ReadAll, Subscribe and ReadStream return durable records
// only. A projection that checkpointed a record no append ever acknowledged
// would otherwise skip the record later written at its position.
//
// Append's context bounds only the wait for the writer to take the append;
// once taken, Append waits for the commit (at most one group away), so the
// caller always learns whether its events were written.
//
// # Throughput
//
// A lone appender pays one fsync per append (0.5 to 1.5 ms on the
// development machines' disk). Concurrent appenders share fsyncs: with 64 of
// them a group holds about 25 to 30 appends, and the limit becomes the time
// to write and sync the group's bytes while Pebble's flushes and compactions
// write the same bytes again. [Log.WriterStats] gives the mean group size.
// The memtable is 64 MiB, not Pebble's 4 MiB, so that flushes keep up with
// large groups. Figures: go test -bench . ./events/embedded.
//
// # Subscriptions
//
// A subscriber reads the store after its last position in chunks, then waits
// on a channel that the writer closes (and replaces) after each commit. There
// is no polling loop: an idle subscriber is parked in a select and burns no
// CPU, and it wakes as soon as an append commits. Because catch-up and live
// are the same read of the store, nothing is skipped or repeated at the
// handover, and a slow subscriber never slows the writer.
//
// # Retention
//
// [Log.Run] calls [Log.Retain] every Config.RetainEvery with the cut-off
// now - Config.Retention. Retain lists the expiring streams last written
// before the cut-off from the t keys, drops each (its records, index, head,
// time key) in synced batches run by the writer between append groups, and
// compacts the emptied range of the global log. Tenant and endpoint streams
// never expire (events.Expires).
package embedded
