// Package due is the projection of the deliveries that still need an
// attempt: per endpoint, new work ahead of retries, each in due-time order.
// Endpoint grains pull their next deliveries from it ([Due.Pull]) and are
// woken through a [Waker] when work becomes due.
//
//	DeliveriesPlanned, outcomes ─▶ projections.Runner ─▶ Due ─▶ Waker ─▶ endpoint grain ─Pull()─▶ Due
//
// # Partitions
//
// Due is a partitioned projection ([projections.Partitioned]): a node holds
// the due work of the delivery partitions it owns, and the cluster places
// each endpoint's grain on the owner of its partition, so a pull never
// leaves the node. Its keys start with the partition, so that a partition's
// summaries load with one scan when it goes live (PartitionsChanged); a
// partition the node loses is forgotten in memory at once (no wakes, no
// sweeps, pulls fail with [ErrNotLive]) and its keys stay in the store,
// behind its checkpoint, for a later return.
//
// # What it follows
//
// The index mirrors the owning grain's decisions and never decides a
// delivery's fate itself: DeliveriesPlanned adds new work due at the planned
// time; AttemptFailed with next_attempt_at moves the delivery to a retry due
// then; AttemptSucceeded, DeliveryExpired and a terminal AttemptFailed
// remove it; ReplayRequested makes it due at the request time as a manual
// retry (bringing an ended delivery back for one attempt: whatever that
// attempt's outcome says next, usually "ended", is applied as above, so a
// replay does not restart automatic retries unless the grain decides so).
// Items stay in the index while in flight; the grain skips those it holds.
//
// On an endpoint ordered by key, only each key's head is due; the others
// wait for their turn (order.go). The index also counts each key's last
// sequence sent, by token, from the attempts and the endpoint's
// OrderingCheckpointed events, forgets counts on TenantErased and
// EndpointDeleted (order_counter.go), numbers the heads a pull returns
// (order_sequence.go), and wakes an endpoint whose counts wait to be
// checkpointed (order_checkpoint.go).
//
// # Wakes
//
// After each batch, the endpoints it touched are summarised again (their
// oldest new delivery and earliest retry, two seeks each); those with new
// work, or a retry due by now, are woken (wake.go). A later retry arms a
// timer (one per endpoint, in a heap) that wakes its endpoint when it
// falls due, in Run (wake_run.go). Wakes are hints and may be lost or
// repeated; the sweeper in Run wakes every endpoint whose oldest due work
// has waited longer than StaleAfter, so a lost wake costs at most
// StaleAfter + SweepInterval, never a delivery. The summaries of a
// partition are loaded from the store when it goes live, by skipping
// through its index (two seeks per endpoint with work). Only the endpoints
// of live partitions are summarised, woken or swept.
//
// # Parts and keys
//
// Each part of the index has a receiver of its own, in files named by its
// concept: the items and their store (item_*.go), which alone reads and
// writes them; what each event changes (apply.go); the ordering by key
// (order_*.go); the wakes (wake_*.go). Each file lists the keys it
// keeps: the items under q (due), w (waiting behind their key's head)
// and r (each delivery's key), the ordering keys' heads under k, the
// counts under n, f, l, u, x and X. All but r, x and X continue with P,
// the endpoint's partition (events.PartitionOf), 2 bytes big-endian.
//
// Due times come from the events (planned at, next_attempt_at, replay
// requested at), never from the clock, so a rebuild gives the same index.
package due
