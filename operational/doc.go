// Package operational is Hookline's own events about a tenant's account,
// delivered as webhooks: an endpoint paused (by a 410 or by a person), a
// circuit opened or closed, a delivery that ended failed, attempts
// exhausted, a recovery finished, a secret rotation started or ended. The
// types are listed in types.go ([Types], with an example payload each);
// they all start with "hookline.", a prefix producers may not publish.
//
// # Where it sits
//
//	events.Log ──▶ projections.Runner ──Apply──▶ Feed (outbox, by partition)
//	                                                 │
//	                         Emitter ◀───────────────┘
//	                            │ PublishOperational (control)
//	                            ▼
//	         event-{tenant}.hl_… : EventPublished + DeliveriesPlanned
//	                            ▼
//	         the tenant's operational endpoints, like any delivery
//
// A tenant names the endpoints that receive them: an endpoint whose event
// types name operational types (or "hookline.*") is an operational
// endpoint, and names nothing else. Operational events then take the same
// path as a producer's: planned at publish, signed, retried, searchable in
// the history, explained by the routing call; only endpoints that name the
// type get them (an endpoint subscribed to every type, "*", does not).
//
// # Who emits, and why there
//
// Every cause is an event the endpoint grain appends (endpoint streams and
// delivery streams). The grain could publish the operational event right
// after its append, but a crash between the two would lose it, and the
// grain holds no record of what it still owes. Instead the log is read
// again: [Feed] is a partitioned projection, so the node that owns an
// endpoint's delivery partition applies its causes, exactly once per
// checkpoint, and writes an outbox entry in the same batch as its
// checkpoint. [Emitter] publishes the entries of the node's live
// partitions and deletes each once published. So:
//
//   - nothing is lost: an entry stays until it is published, across
//     crashes and restarts; a crash before a batch's commit re-applies
//     the batch, entries included;
//   - each is emitted once in the cluster: only the partition's owner
//     emits its entries. Endpoint streams are records of no partition,
//     which every node applies, so every node keeps their entries under
//     the endpoint's partition, and those of partitions it does not own
//     are dropped after MaxAge: a node that gains a partition emits what
//     its previous owner may not have. That, and a crash between a
//     publish and the entry's removal, emit an event again; it publishes
//     the same event id with the same bytes (both derive from the cause
//     record alone: id "hl_" + the record's id), which the publish path
//     answers as a duplicate without writing;
//   - a cause older than MaxAge (24 h) when applied is passed over: a
//     rebuilt store or a partition caught up from far behind does not
//     replay last month's incidents to receivers.
//
// # No loops
//
// An operational endpoint's own deliveries carry only operational events,
// and nothing about an operational endpoint or an operational delivery
// becomes an operational event: its circuit, its pause, its failed
// deliveries, its rotations are recorded in the log and searchable, but
// sent nowhere (the feed tracks which endpoints are operational from
// their configuration, in log order). Manual replays, and deliveries ended
// because their endpoint was deleted, cause none either.
package operational
