// Package postgres is an [events.Log] on PostgreSQL (13 or later), through
// github.com/jackc/pgx/v5 and its pool; it is the only package that imports
// pgx. It sits at the bottom of the flow, beside events/embedded and
// events/esdb: for teams that already run PostgreSQL, and as the shared log
// of the multi-node tests.
//
// # Use
//
// [Open] connects and creates or updates its tables, idempotently, in
// Config.Schema (default "hookline"); nodes that open at once take turns.
// Several nodes may share one schema. Run [Log.Run] beside it: it creates
// the time partitions ahead and drops the expired ones. Close it last.
//
// # What it guarantees
//
//   - Positions are handed out in commit order, with no hole that a later
//     commit could fill: a subscriber that has read up to p never misses an
//     event committed later. [Log.Head] is the last position committed. An
//     [events.Position] has Commit = Prepare = the position.
//   - Appends are committed in groups (up to 128 appends or 16 MiB, one
//     transaction and one round trip), each append getting exactly the
//     outcome it would get alone. ctx bounds an append's wait for the
//     writer; once its group has started, the caller learns for sure
//     whether its events were written. Close answers the appends still
//     waiting with [events.ErrClosed].
//   - [Log.Subscribe] filters in the database (stream prefixes, types,
//     partitions) and wakes on a notification at each commit; a lost one
//     costs at most Config.PollEvery (2 s). Catch-up and live are the same
//     read: nothing is skipped or repeated at the handover.
//
// # Retention
//
// Event and delivery streams ([events.Expires]) live in time partitions by
// the time of the stream's first event, one per Config.PartitionEvery (a
// day); [Log.Run] drops, whole, those whose period ended more than
// Config.Retention (30 days) ago. Retention thus counts from a stream's
// first event (events/embedded counts from its last write), so a stream is
// never cut in two. A dropped stream reads as [events.ErrStreamNotFound];
// positions are never reused. Tenant and endpoint streams are never
// dropped.
//
// # Errors
//
// Driver errors are translated at the boundary: text the server cannot
// store (a NUL byte, invalid UTF-8) or a stream name too long for the
// index is [events.ErrInvalid]; anything after Close is [events.ErrClosed];
// everything else is wrapped with what the call was doing.
//
// # Tests
//
// The conformance suite (events/eventstest) and this package's tests run
// against the server at HOOKLINE_POSTGRES_URL, each test in a fresh schema,
// dropped at the end; they are skipped, saying so, when it is not set.
// .ci/postgres.sh installs and starts a server on loopback and prints the
// variable:
//
//	eval "$(.ci/postgres.sh)"
//	go test -race ./events/postgres
//
// The design (tables, group commit, why a subscriber never skips an event,
// the alternatives weighed, measured throughput) is in docs/.
package postgres
