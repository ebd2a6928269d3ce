// Package relay moves committed rows of a producer's outbox table
// (client/outbox) into Hookline: `hookline relay` runs a Worker until it is
// stopped. It also reconciles the outbox with what Hookline accepted
// (Reconcile, `hookline outbox reconcile`). It sits on the producer's side
// of the boundary, between the producer's database and the control API:
//
//	producer's tx ─▶ outbox table ─▶ Worker ─▶ client.PublishBatch ─▶ Hookline
//	                      ▲             │
//	                      └─ marks ◀────┘  (relayed_at, duplicate, refused_at)
//
// # One batch
//
// A Worker runs Config.InFlight loops of batches. A batch is one
// transaction in the producer's database:
//
//  1. SELECT … WHERE relayed_at IS NULL AND refused_at IS NULL ORDER BY seq
//     LIMIT BatchSize FOR UPDATE SKIP LOCKED: the oldest waiting rows that
//     no other batch holds, locked until this transaction ends;
//  2. PublishBatch of their events, within PublishTimeout (the client
//     retries UNAVAILABLE and lost answers inside it);
//  3. UPDATE: accepted rows get relayed_at (and duplicate, when Hookline
//     had them already), rows Hookline refused for good (INVALID_ARGUMENT,
//     ALREADY_EXISTS with another payload, PERMISSION_DENIED for a tenant
//     this token may not publish for, too large) get refused_at and the
//     reason; rows that failed otherwise (Hookline down, the token
//     refused) are left waiting;
//  4. COMMIT.
//
// # Why no row is ever skipped
//
// The relay keeps no cursor. Whether a row has been relayed is written in
// the row itself, and every batch looks, in a fresh snapshot, for all the
// committed rows not marked yet, whatever their seq. A row that commits
// late with a lower seq than rows already relayed is simply a waiting row
// in the next batch's snapshot: there is no position it could have been
// left behind. This is the problem events/postgres solves for the log's
// positions with a head lock that orders commits; here the rows belong to
// the producer's own transactions, which the relay cannot order, so the
// relay does not depend on their order at all. seq only makes batches take
// the oldest rows first. TestLateCommitIsNotSkipped holds a transaction
// with the lower seq open while a later one commits and is relayed, then
// commits it; TestConcurrentProducers commits waves of concurrent
// transactions in shuffled order, a fifth rolled back, under a running
// Worker.
//
// The alternatives weighed: a visibility-safe cursor (relay rows whose
// transaction ids are below the oldest running transaction's,
// pg_snapshot_xmin) stalls the relay behind any long transaction in the
// producer's database, ours or not, and several relays would have to share
// one cursor; logical replication (pglogrepl) needs wal_level=logical, a
// replication role and a slot that retains WAL while the relay is down (a
// disk that fills in an outage), and one slot has one consumer. Marking
// rows costs one UPDATE per row (batched: one statement per batch) and the
// dead tuples that vacuum removes; the table's partial index keeps the
// queue of waiting rows small whatever the table's size.
//
// # At least once, and nothing twice as a new event
//
// A row is marked only after Hookline accepted its event, in the
// transaction that holds the row's lock. A relay killed at any point (before
// publishing, during, after publishing and before its commit) leaves the
// row unmarked: its connection dies, PostgreSQL aborts the transaction and
// releases the lock, and the next batch (of any Worker) publishes the row
// again. Hookline's publishing is idempotent by event id: the event id is
// the row's event_id, the bytes are the row's payload, so the second
// publish is answered "duplicate" with the original plan, and nothing new
// is written. The row is then marked with duplicate = true. A crash
// between Hookline's append and its answer is the same case, handled the
// same way; so is a mark lost in a crash of the producer's database, which
// is why a batch commits its marks with synchronous_commit off (no wait for
// the WAL's flush). cmd/hookline's TestRelayKilled runs two `hookline relay`
// processes and kills one, in turn, with SIGKILL, twelve times under load,
// and checks every committed row became exactly one event.
//
// # Several relays
//
// FOR UPDATE SKIP LOCKED gives concurrent batches, of one Worker or of
// Workers in other processes, disjoint rows without waiting for each
// other: a second relay is for availability and throughput at once. A row
// is published by one batch at a time, and a batch that finds a row
// another one has just marked re-checks it under its lock and leaves it. A
// Worker that hangs holds only its batch's rows, at most PublishTimeout;
// one cut off from its database is ended by the server after
// idle_in_transaction_session_timeout (set per batch, PublishTimeout + 30 s).
// TestTwoWorkers and TestStalledWorkerDoesNotStallOthers check both.
//
// # Backpressure and memory
//
// A Worker holds at most InFlight batches of BatchSize rows (by default 2 ×
// 100 rows, each payload at most Hookline's 256 KiB). While Hookline is slow
// a batch simply takes longer; while it is down (or refuses the token)
// batches fail, the rows stay in the outbox, and the Worker backs off from
// PollEvery up to BackoffCap. Nothing is dropped, and the backlog drains
// when Hookline returns (cmd/hookline's
// TestRelayBacklogDrainsAfterHooklineReturns stops the node, a process of
// its own, commits 300 rows, and starts it again). A row Hookline refuses
// for good is parked (refused_at), logged and counted, so it never blocks
// the rows behind it.
//
// # Retention
//
// Each Worker deletes, every CleanupEvery, the relayed rows created more
// than Retention ago (7 days by default), in chunks of 5,000 rows, skipping
// rows another cleaner holds. Waiting and refused rows are never deleted.
//
// # Metrics
//
// See metrics.go: rows waiting, rows refused, the oldest waiting row's age,
// the relay lag (insert to relay), rows relayed by outcome (their rate is
// the published rows per second), failed batches, deleted rows.
//
// # Reconciliation
//
// Reconcile reads the committed rows created in a time range, in pages,
// and looks their event ids up in Hookline (LookupEvents, which reads
// Hookline's log). Each row is accepted (with the same payload digest),
// mismatched (accepted with other bytes), refused, waiting (not relayed
// yet) or lost (marked relayed, unknown to Hookline). With Repair it
// publishes the waiting and lost rows, idempotently.
package relay
