// Package endpoint is the endpoint grain: one virtual actor per endpoint, of
// the cluster kind "endpoint" ([Kind], [NewKind]), identified by the
// endpoint id. It keeps the endpoint's configuration and signing secrets,
// and runs its delivery loop.
//
// # Where it sits
//
//	control ─EndpointCommand─▶ endpoint grain ─▶ events (endpoint-{id}, delivery-{id})
//	projections/due ─Wake─▶ endpoint grain ─slot─▶ dispatch ─▶ attempt (HTTP)
//
// # Commands
//
// A caller sends an [internalv1.EndpointCommand] and gets an
// [internalv1.EndpointReply]: create, get, update (a new config_version),
// rotate and retire signing secrets, pause, resume, delete, reseal, and,
// when the delivery loop runs, replay a delivery and start, list or read
// bulk recoveries (a dry run answers the recovery's manifest; [ListDigest]
// computes its digest). Commands are handled one at a time, in arrival
// order; a grain never blocks in Receive.
//
// The answer's error tells the caller what to do:
//
//   - NOT_FOUND: the endpoint does not exist, is deleted, or belongs to
//     another tenant than the command's (the two look the same);
//   - ALREADY_EXISTS: create of an id in use or deleted (ids are never
//     reused);
//   - ABORTED: another activation owns the endpoint's streams now; retry,
//     and the retry reaches it;
//   - UNAVAILABLE: the grain is stopping or passivating, or its I/O
//     failed; retry;
//   - INVALID_ARGUMENT and FAILED_PRECONDITION name the field at fault and
//     the fix.
//
// A command carries a request id: a retry of one whose answer was lost is
// answered from what the first run wrote (a new secret included) instead
// of running twice. A secret is returned once, in the reply of the create
// or rotation that made it; the log holds it sealed (package seal). A rotation
// keeps the previous secret live for an overlap (24 h by default), after
// which the grain retires it.
//
// # Delivery
//
// With [Config.Due] set, the grain runs its delivery loop: a Wake (from a
// publish or the due projection) makes it pull its due deliveries,
// which it attempts within the endpoint's limits (in-flight limit, tenant
// quota lease, circuit breaker, token bucket, a slot of the node's
// dispatcher) and records on each delivery's stream. A [Planned] hint hands
// it the deliveries a publish on its node just planned. A node stops
// gracefully with a [Drain], and a [Quarantine] holds back an activation
// that lost ownership on this node. Without Config.Due the grain only
// answers commands; replay and recovery are then refused.
//
// # What it writes
//
// It is the single writer of endpoint-{endpoint_id} (configuration,
// secrets, status, circuit transitions, recoveries), of the
// delivery-{delivery_id} streams of its deliveries (attempts, expiry,
// replay requests) and of recovery-{recovery_id} (a recovery's list).
//
// # Lifetime
//
// A grain that holds nothing (no command, no delivery, no recovery under
// way) and receives nothing for [Config.IdleAfter] leaves memory; the next
// wake or command activates it again, rebuilt from its stream. A paused
// endpoint holds nothing and is not woken until it resumes.
//
// [State] and [State.Decide] are the pure part (validate a command, return
// its events): no I/O and no actor code. The design is described in
// docs/architecture.md.
package endpoint
