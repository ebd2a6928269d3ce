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
//	                                ApiKeyIssued, ApiKeyRevoked,
//	                                TenantSettingsChanged, EventTypeDefined,
//	                                TenantErased
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
//	                                DeliveryExpired, ReplayRequested,
//	                                OrderingKeySkipped
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
//	ordering-{endpoint_id}          OrderingCheckpointed: the last sequence
//	                                of the endpoint's ordering keys (by
//	                                token), before retention drops the
//	                                attempts that say it; never expires
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
// chunk that of its deliveries, every other event none. A subscription asks
// for its partitions with [Filter.Partitions], and each backend filters as
// close to the data as it can (PostgreSQL in the database, EventStoreDB in
// the node before decoding, the embedded log while it reads). A
// subscription also reports how far it has read ([SubscribeFunc]'s
// through), so that a subscriber whose filter passes none of the last
// events still knows it is caught up.
//
// # Backends
//
// [Log] is implemented by events/embedded (Pebble, the default, one node),
// events/esdb (EventStoreDB/KurrentDB) and events/postgres. All of them pass
// the conformance suite in events/eventstest.
package events
