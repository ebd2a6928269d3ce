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
//	append_group(...)  a PL/pgSQL function: a group of appends, one
//	                   statement
//	append(...)        append_group of one, for older nodes
//
// A stream has no row of its own: its last revision is its last event, found
// through the unique index (stream, revision, expires, born); all of a
// stream's events share expires (a function of its name, [events.Expires])
// and born (the time of its first event), so that index is unique on
// (stream, revision) over the whole log, and a stream lives in exactly one
// partition.
//
// # An append, and group commit
//
// Append checks its arguments ([events.CheckAppend] with
// Config.MaxEventSize; text PostgreSQL cannot store) and hands the append
// to the Log's writer, one goroutine that commits appends in groups, as
// events/embedded does: it takes one waiting append, then every other one
// already waiting (the callers that arrived while the previous group was
// committing), up to 128 appends or 16 MiB, and runs them with one call of
// append_group, in autocommit: one round trip, one transaction, one WAL
// flush for the whole group.
//
// append_group first takes the advisory locks of the group's streams, each
// once, in increasing order of key (appends to one stream take turns;
// other transactions on other streams run in parallel). Then, for each
// append in order, it reads the stream's last revision, which includes the
// group's earlier appends, and checks the expectation. When the expectation
// fails it looks for the same event ids at the place the append would have
// put them (revision 0 for NoStream, after the expected revision for Exact,
// the tail for Any and StreamExists): found, it is a retry of an append
// that landed, answered with the original revision and position and nothing
// written; otherwise the answer is a wrong revision with the stream's last
// revision. Neither writes nor raises anything, so neither touches the other
// appends of the group: each gets exactly the outcome it would get alone,
// after the ones before it. When the expectation holds, the append is given
// the next positions: at the group's first such append, append_group takes
// the head lock and reads head. The events are inserted together, in one
// set-based INSERT at the end (and earlier when an append is about to read
// a stream that has events not inserted yet). Then head is updated once,
// and one notification is queued. The commit makes all of it visible at once
// and sends the notification; Append returns each caller its own answer
// after the commit.
//
// An append that makes the server raise an error (a stream name too long to
// index, a missing partition) aborts the whole statement: nothing of the
// group is written, and the writer runs each of its appends again alone,
// each in its own transaction, for its own outcome. The fast path costs
// nothing when no append fails (no savepoint, no subtransaction, so no
// subtransaction overflow under large groups), and a refused group costs one
// transaction per append, once. When the outcome of a group is unknown (the
// connection broke after the statement was sent) every append of it reports
// the error, as a lone append would.
//
// Context: ctx bounds an append's wait for the writer. An append whose ctx
// ends before the writer takes it is dropped, unwritten. Once taken (just
// before its group starts), it waits for the group's outcome whatever ctx
// does, at most one transaction: the caller learns for sure whether its
// events were written. Close lets the group in flight finish and answers the
// appends still waiting with [events.ErrClosed].
//
// # Why a subscriber never skips an event
//
// Positions are handed out in commit order. The head lock (a transaction
// advisory lock taken just before head is read) is held until the
// transaction ends, and PostgreSQL releases a transaction's locks only after
// the commit is durable (synchronous_commit on) and visible to new
// snapshots. So if transaction A takes positions before transaction B, B
// took the lock after A released it, hence after A's commit was visible; B
// reads A's head and commits later still. A group is one transaction: its
// appends take consecutive positions, in the group's order, and become
// visible together. Several Logs on one schema (nodes) each commit their
// own groups; the head lock orders their transactions just the same, and
// since every transaction takes its stream locks in one global order before
// the head lock, none waits for another in a cycle. (head is also read FOR
// UPDATE, so that an isolation level above read committed fails the group
// instead of reading a stale head.) Two consequences:
//
//   - Any snapshot sees a prefix: if it sees B's events it sees A's. An
//     aborted group leaves no hole either, as head's update is rolled
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
// strictly increasing positions 1..head without a gap), TestTwoLogsNoGap
// (the same across two Logs on one schema) and
// TestSlowCommitterHoldsLaterPositions (an append held open: a later group
// waits for it, readers and Head do not see past it) check this design;
// TestGroupOutcomes and TestGroupFailuresAreIsolated check that each append
// of a group gets its own outcome.
//
// The alternatives weighed: ordering by transaction id and reading only
// below the oldest running transaction (pg_snapshot_xmin) lets appends
// commit in parallel, but any long transaction in the database, ours or
// not, stalls every subscriber, and positions would not follow commit order
// as [events.Position] promises. A sequencer process is one more component
// to run and fail over. The cost of this design is that transactions that
// append commit one at a time, which group commit makes cheap: one WAL
// flush and one round trip per group, instead of per append.
//
// # Throughput
//
// BenchmarkAppend (one 2 KB event of random bytes per append, each
// appender on its own streams), before and after group commit, alternated
// in one run on a shared development machine (2 CPUs, load average 6 to 10
// from other work, so absolute figures are low and noisy; the ratios are
// what carries over). Medians of 7 rounds, appends/s:
//
//	appenders  one transaction per append  group commit  ratio (range)       mean group
//	1          295                         284           1.0 (0.3 to 3.4)    1
//	16         344                         964           3.0 (2.1 to 4.1)    8
//	64         168                         1,596         8.5 (4.6 to 22)     33
//
// Before, more appenders meant less throughput: they queued on the head
// lock, one commit each. After, the best rounds reached 2,165 appends/s
// with 16 appenders and 2,726 with 64. One append alone costs what it did
// (measured in the server, interleaved: equal within 5%).
//
// Groups hold about half the appenders: one half waits for its commit while
// the other queues. A group's cost is now mostly per event, not per
// transaction: the stream lookup (an index probe per time partition) and
// the insert; and a random 2 KB payload does not compress, so each event
// also goes out of line to TOAST, which measured 5 to 10 times the insert
// of a compressible event of the same size. Small or compressible events,
// such as an attempt's outcome, cost less.
//
// An [events.Position] has Commit = Prepare = the position.
//
// # Subscriptions
//
// [Log.Subscribe] reads pages of up to 512 matching events after its last
// position (the filter runs in the database: stream prefixes as LIKE,
// types as = ANY), together with the head in the same snapshot. When the
// log has nothing more it waits: the Log keeps one connection (outside the
// pool) in LISTEN on the channel "<schema>.appended", and append_group's
// one pg_notify per group, delivered at commit, wakes every subscriber at
// once. A lost
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
// for a new stream (Run not running) fails its group, then, alone, creates
// the partition and tries again.
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
// *pgconn.PgError: text the server cannot store (a NUL byte, invalid UTF-8:
// refused before the append reaches the writer) or a stream name too long
// for the index becomes [events.ErrInvalid]; anything after Close becomes
// [events.ErrClosed]; a unique violation on (stream, revision), which only a
// writer bypassing append_group's stream locks could cause, fails the
// group, and the append, alone, runs once more, then reporting the wrong
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
