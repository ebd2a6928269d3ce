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
//  2. PublishBatch of their events, within PublishTimeout;
//  3. UPDATE: accepted rows get relayed_at (and duplicate, when Hookline
//     had them already), rows Hookline refused for good (invalid, another
//     payload under the same event id, a tenant this token may not publish
//     for, too large) get refused_at and the reason; rows that failed
//     otherwise (Hookline down, the token refused) are left waiting;
//  4. COMMIT.
//
// # What it guarantees
//
//   - No committed row is ever skipped: the relay keeps no cursor, each
//     batch looks for every committed row not marked yet, whatever its seq
//     and whenever its transaction committed.
//   - At least once, and nothing twice as a new event: a row is marked only
//     after Hookline accepted it; a relay killed at any point leaves it
//     unmarked, and publishing it again is answered "duplicate" (the event
//     id is the row's event_id), so the row is marked duplicate = true.
//   - Several relays, in one process or several, take disjoint rows without
//     waiting for each other; one that hangs holds only its batch's rows,
//     at most PublishTimeout.
//   - Bounded memory: at most InFlight batches of BatchSize rows. While
//     Hookline is down, batches fail, the rows wait and the Worker backs off
//     from PollEvery up to BackoffCap; nothing is dropped. A row refused
//     for good is parked, logged and counted, and never blocks the rows
//     behind it.
//
// # Retention
//
// Each Worker deletes, every CleanupEvery, the relayed rows created more
// than Retention ago (7 days by default). Waiting and refused rows are
// never deleted.
//
// # Metrics
//
// See metrics.go: rows waiting, rows refused, the oldest waiting row's age,
// the relay lag (insert to relay), rows relayed by outcome, failed batches,
// deleted rows.
//
// # Reconciliation
//
// Reconcile reads the committed rows created in a time range and looks
// their event ids up in Hookline (LookupEvents). Each row is accepted (with
// the same payload digest), mismatched (accepted with other bytes), refused,
// waiting (not relayed yet) or lost (marked relayed, unknown to Hookline).
// With Repair it publishes the waiting and lost rows, idempotently.
//
// Why the design holds, the alternatives weighed and the tests that check
// it are in docs/.
package relay
