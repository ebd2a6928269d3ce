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
//	                                writer: the publish handler
//	delivery-{delivery_id}          AttemptSucceeded, AttemptFailed,
//	                                DeliveryExpired, ReplayRequested
//	                                writer: the endpoint grain owning the
//	                                delivery's endpoint
//
// Stream names follow EventStoreDB's category convention (category-id), so
// $ce-endpoint and $et-AttemptFailed work in its UI.
//
// # Backends
//
// [Log] is implemented by events/embedded (Pebble, the default, one node),
// events/esdb (EventStoreDB/KurrentDB) and events/postgres. All of them pass
// the conformance suite in events/eventstest.
package events
