// Package registry is the projection of tenants, API keys and endpoints:
// the part of the log that publish and authentication read. Publish asks it
// which endpoints of a tenant subscribe to an event type, with their
// current config version ([Registry.EndpointsForType]); the control API
// authenticates API keys by hash ([Registry.TenantByKeyHash]) and lists
// endpoints.
//
//	tenant-… and endpoint-… streams ─▶ projections.Runner ─▶ Registry ─▶ control (publish, auth, queries)
//
// # Semantics
//
//   - An endpoint's event types are names (order.paid), prefix patterns
//     (order.*: order.paid, order.item.added) or "*" ([AllTypes]: every
//     type but the operational ones; no type at all counts as "*"). The
//     index keeps each entry as it is; a type is answered from the entries
//     that match it ([eventtype.Patterns]), so planning reads one short
//     range per segment of the type, whatever the number of endpoints.
//   - Paused endpoints still get deliveries planned (they wait in the due
//     index); disabled and deleted endpoints get none. EndpointResumed clears
//     both pause and disable; deletion is final.
//   - A revoked key stops authenticating at once (its hash entry is deleted
//     in the batch that applies the revocation).
//   - Secrets never reach the registry: only their live versions.
//
// # Key layout
//
// Under the projection's prefix (S is projections.AppendString):
//
//	t S(tenant)                       Tenant (JSON)
//	k sha256                          live API key: tenant and key id (JSON)
//	K S(tenant) S(key id)             API key by id, revoked ones too (JSON)
//	e S(endpoint)                     endpoint (JSON, config as protobuf)
//	l S(tenant) S(endpoint)           the tenant's endpoints, deleted excluded
//	x S(tenant) S(entry) S(endpoint)  EndpointRef (JSON), deleted and disabled excluded
//
// Queries read Pebble directly rather than an in-memory copy: a point read
// or a short range scan costs microseconds from the block cache, the store
// is the only copy so there is nothing to keep consistent, and memory does
// not grow with the number of endpoints. A query sees every batch committed
// before it started; after an append, [projections.Runner.WaitFor] its
// position to read your write.
package registry
