// Package postgres is an [events.Log] on PostgreSQL (13 or later), through
// github.com/jackc/pgx/v5 and its pool; it is the only package that imports
// pgx. It sits at the bottom of the flow, beside events/embedded and
// events/esdb: for teams that already run PostgreSQL, and as the shared log
// of the multi-node tests.
//
// # Tables
//
// [Open] creates or updates, idempotently and under an advisory lock of the
// schema (Config.Schema, default "hookline"), so that nodes opening at once
// take turns:
//
//	head               one row: the last position handed out
//	events             every event: position, stream, revision, id, type,
//	                   data, metadata, recorded, expires, born
//	  events_kept        LIST partition expires = false: tenant and
//	                     endpoint streams, never dropped
//	  events_expiring    LIST partition expires = true: event and delivery
//	                     streams, RANGE-partitioned by born
//	    events_exp_<lo>  one table per Config.PartitionEvery (a day)
//	partitions         the time partitions and their bounds
//	append(...)        a PL/pgSQL function: one append, one statement
//
// A stream has no row of its own: its last revision is its last event, found
// through the unique index (stream, revision, expires, born); all of a
// stream's events share expires (a function of its name, [events.Expires])
// and born (the time of its first event), so that index is unique on
// (stream, revision) over the whole log, and a stream lives in exactly one
// partition.
//
// # An append
//
// Append checks its arguments with [events.CheckAppend] (Config.MaxEventSize),
// then calls append(...) in autocommit: one round trip, one transaction. The
// function takes the stream's transaction-level advisory lock (appends to one
// stream take turns; others run in parallel), reads the stream's last
// revision, and checks the expectation. When the expectation fails it looks
// for the same event ids at the place the append would have put them
// (revision 0 for NoStream, after the expected revision for Exact, the tail
// for Any and StreamExists): found, it is a retry of an append that landed,
// answered with the original revision and position and nothing written;
// otherwise the answer is a *[events.WrongRevisionError] with the stream's
// last revision. When it holds, the function takes the head's lock, adds the
// number of events to head, inserts the events at the positions just below
// the new head, and calls pg_notify; the commit makes all of it visible at
// once and sends the notification.
//
// # Why a subscriber never skips an event
//
// Positions are handed out in commit order. The head lock (a transaction
// advisory lock taken just before head is updated) is held until the
// transaction ends, and PostgreSQL releases a transaction's locks only after
// the commit is durable (synchronous_commit on) and visible to new
// snapshots. So if append A takes positions before append B, B took the lock
// after A released it, hence after A's commit was visible; B commits later
// still. Two consequences:
//
//   - Any snapshot sees a prefix: if it sees B's events it sees A's. An
//     aborted append leaves no hole either, as head's update is rolled
//     back with it. The only holes are those of retention, which are never
//     filled again. So a reader that has seen up to position p and reads
//     "position > p" later can never miss an event that commits afterwards
//     with a lower number: there is none.
//   - head, read in any snapshot, is the last position committed, and every
//     position up to it is committed in that snapshot. [Log.Head] is one
//     row, and a subscriber whose filter matches nothing up to the head can
//     move its position to the head safely.
//
// A bigserial filled at insert does not have this property: a transaction
// can take 11 and commit before another that took 10, and a reader in
// between moves past 10 for good. TestConcurrentAppendersNoGap (32
// appenders, a live subscriber checking every event arrives once, in
// strictly increasing positions 1..head without a gap) and
// TestSlowCommitterHoldsLaterPositions (an append held open: a later one
// waits for it, readers and Head do not see past it) check this design.
//
// The alternatives weighed: ordering by transaction id and reading only
// below the oldest running transaction (pg_snapshot_xmin) lets appends
// commit in parallel, but any long transaction in the database, ours or
// not, stalls every subscriber, and positions would not follow commit order
// as [events.Position] promises. A sequencer process is one more component
// to run and fail over. The cost of this design is that appends commit one
// at a time: throughput is about one WAL flush plus a few inserts per
// append, ~1,000 appends/s from one appender and ~800/s from 16 on the
// development machines (2 CPUs, fdatasync ~0.15 ms); PostgreSQL's own
// group commit (commit_delay) cannot help, since no two appends are
// committing at once. Batching several appends into one transaction on the
// client (one writer per Log, as events/embedded does) is the way to go
// further.
//
// An [events.Position] has Commit = Prepare = the position.
//
// # Subscriptions
//
// [Log.Subscribe] reads pages of up to 512 matching events after its last
// position (the filter runs in the database: stream prefixes as LIKE,
// types as = ANY), together with the head in the same snapshot. When the
// log has nothing more it waits: the Log keeps one connection (outside the
// pool) in LISTEN on the channel "<schema>.appended", and append's
// pg_notify, delivered at commit, wakes every subscriber at once. A lost
// notification (the listener reconnecting, say) costs at most
// Config.PollEvery (2 s): subscribers read the log that often anyway. There
// is no busy loop, and catch-up and live are the same read, so nothing is
// skipped or repeated at the handover.
//
// # Retention
//
// Event and delivery streams live in time partitions by born, the time of
// the stream's first event; [Log.Run] (every Config.MaintainEvery, an hour)
// creates the partitions for now and the next two periods, and drops, with
// DROP TABLE, those whose whole period ended more than Config.Retention (30
// days) ago: whole streams go at once, in constant time, without a DELETE
// or a vacuum. A partition is locked as appends lock them (events first),
// waiting at most 2 s, so a busy log postpones the drop to the next pass
// rather than queue appends behind it. An append that finds no partition
// for a new stream (Run not running) creates it and tries again.
//
// The difference with events/embedded, which drops a stream 30 days after
// its last write: here retention counts from the stream's first event, so
// that a stream is never cut in two. Hookline's expiring streams are written
// within a day of their first event (deliveries retry for 24 h); a manual
// replay of a delivery close to the end of its 30 days is dropped with it.
// A dropped stream reads as [events.ErrStreamNotFound]; its name may be
// written again, as a new stream from revision 0. The whole log keeps its
// holes: positions are never reused.
//
// Tenant and endpoint streams are in events_kept and are never dropped.
//
// # Errors
//
// Driver errors are translated at the boundary with errors.As on
// *pgconn.PgError: text the server cannot store (a NUL byte, invalid UTF-8)
// or a stream name too long for the index becomes [events.ErrInvalid];
// anything after Close becomes [events.ErrClosed]; a unique violation on
// (stream, revision), which only a writer bypassing append could cause, is
// answered by running the append again, which then reports the wrong
// revision or the idempotent retry. Everything else is wrapped with what the
// call was doing.
//
// # Tests
//
// The conformance suite (events/eventstest) and this package's tests run
// against the server at HOOKLINE_POSTGRES_URL, each test in a fresh schema
// with a random name, dropped at the end; they are skipped, saying so, when
// it is not set. .ci/postgres.sh installs and starts a server on loopback
// and prints the variable:
//
//	eval "$(.ci/postgres.sh)"
//	go test -race ./events/postgres
//	go test -run XXX -bench . ./events/postgres
package postgres
