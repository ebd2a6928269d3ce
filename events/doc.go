// Package events is Hookline's log: every state change of the system is an
// event appended to a stream, and everything a user can query is a
// projection of that log. It sits at the bottom of the flow; actors and
// projections import it, it imports only the generated protobuf types.
//
// # Streams and their single writers
//
// Every stream has exactly one writer, and every append passes an expected
// revision. A wrong-revision error means the writer is no longer the owner
// (another activation took over): it stops, it does not retry blindly.
//
//	tenant-{tenant_id}              TenantCreated, TenantQuotaChanged,
//	                                ApiKeyIssued, ApiKeyRevoked
//	                                writer: the tenant grain
//	endpoint-{endpoint_id}          EndpointCreated, EndpointUpdated,
//	                                SecretRotated, SecretRetired,
//	                                EndpointPaused, EndpointResumed,
//	                                EndpointDisabled, EndpointDeleted,
//	                                CircuitOpened, CircuitHalfOpened,
//	                                CircuitClosed
//	                                writer: the endpoint grain
//	event-{tenant_id}.{event_id}    EventPublished + DeliveriesPlanned, in one
//	                                append with expected revision NoStream
//	                                writer: the publish handler; after it,
//	                                only reconciliation's repair, which
//	                                appends a DeliveriesPlanned (its repair
//	                                set) with the revision it read
//	portal-{token_id}               PortalTokenIssued, PortalTokenRevoked
//	                                writer: the control API's portal
//	                                handler (issue: expected NoStream;
//	                                revoke: Exact 0); expires
//	delivery-{delivery_id}          AttemptSucceeded, AttemptFailed,
//	                                DeliveryExpired, ReplayRequested
//	                                writer: the endpoint grain owning the
//	                                delivery's endpoint
//	reconcile-{run_id}.{part}       ReconcileRepaired, one per repair
//	                                writer: the node that reconciled that
//	                                part of the run (part "plans": the node
//	                                asked; else the node's own name)
//	recovery-{recovery_id}          RecoveryListed chunks: the exact list a
//	                                window recovery replays, in one append
//	                                with expected revision NoStream, before
//	                                the endpoint's RecoveryStarted
//	                                writer: the endpoint grain
//
// Stream names follow EventStoreDB's category convention (category-id), so
// $ce-endpoint and $et-AttemptFailed work in its UI.
//
// # Partitions
//
// Delivery work is split into [Partitions] partitions by endpoint
// ([PartitionOf]); each event carries its partition ([Event.Partition]):
// a delivery stream's events that of their endpoint, each DeliveriesPlanned
// chunk that of its deliveries (a plan is chunked by partition), every
// other event none. A cluster gives each partition one owner node, which
// alone applies its records; a subscription asks for its partitions with
// [Filter.Partitions], and each backend filters as close to the data as it
// can, so that a node reads its share of the log, not all of it:
//
//   - PostgreSQL stores the partition in a column (part) and filters on it
//     in the database, with the event types: a node's subscription gets
//     only the records of its partitions and of none, and the published
//     events' payloads, which no projection reads, never leave the server;
//   - EventStoreDB has one server-side filter per subscription: the event
//     types (which also leave the payloads on the server); the partition
//     travels in the metadata (see events/esdb) and is checked in the node
//     before anything is decoded. Per-partition streams written by an
//     idempotent indexer (what EventStoreDB's own $by-category projections
//     do) would let the server filter them too; not done;
//   - the embedded log serves one node, which owns every partition; it
//     filters while it reads, before it copies or decodes a record.
//
// A subscription also reports how far it has read ([SubscribeFunc]'s
// through), so that a subscriber whose filter passes none of the last
// events still knows it is caught up.
//
// # Backends
//
// [Log] is implemented by events/embedded (Pebble, the default, one node),
// events/esdb (EventStoreDB/KurrentDB) and events/postgres. All of them pass
// the conformance suite in events/eventstest.
package events
