// Package endpoint is the endpoint grain: one virtual actor per endpoint, of
// the cluster kind "endpoint", identified by the endpoint id.
//
// # Where it sits
//
// The control API (cluster/control) sends it a [internalv1.EndpointCommand]
// and gets a [internalv1.EndpointReply]: create, read, update (a new
// config_version), rotate and retire signing secrets, pause, resume, delete.
// The publish handler and the due projection send it Wake hints, which the
// delivery loop answers (loop.go, flight.go, record.go): it pulls due
// deliveries from the due projection, attempts them through actors/attempt
// within the endpoint's limits (circuit breaker, token bucket, in-flight
// limit, tenant quota lease, a slot from the node's actors/dispatch), and
// records each outcome on the delivery's stream, with the attempt's lineage
// (lineage.go: why it happened, what held it, its trace context, what its
// failure decided). It also carries out manual replays (replay.go) and bulk
// recoveries (recover.go). Without Config.Due the loop is off and the grain
// only answers commands.
//
// # What it writes
//
// It is the single writer of endpoint-{endpoint_id}: EndpointCreated
// (config_version 1), EndpointUpdated (config_version+1 and the whole new
// config), SecretRotated, SecretRetired, EndpointPaused, EndpointResumed and
// EndpointDeleted, and for the delivery loop CircuitOpened,
// CircuitHalfOpened, CircuitClosed, EndpointPaused (REASON_GONE on a 410),
// RecoveryStarted, RecoveryProgressed and RecoveryFinished. It is also the single writer of the delivery-{delivery_id} streams
// of its deliveries: AttemptSucceeded, AttemptFailed, DeliveryExpired and
// ReplayRequested, each appended with the revision it read or wrote last.
//
// Secrets are generated with crypto/rand, returned once in the reply and
// sealed with actors/seal (AES-256-GCM, bound to endpoint and version) before
// they reach the log. A rotation keeps the previous secret live for an
// overlap (24 h by default); when it ends the grain appends SecretRetired
// (REASON_OVERLAP_ENDED): it checks on activation, before every command and
// on a timer, so a grain that is active retires on time, and one that was
// not retires as soon as it is activated.
//
// # Isolation and deletion
//
// A command whose tenant_id differs from the endpoint's answers NOT_FOUND,
// exactly as an endpoint that does not exist. A deleted endpoint answers
// NOT_FOUND to every command but create, which answers ALREADY_EXISTS:
// endpoint ids are never reused, since the stream holds the old endpoint.
//
// # Fencing, retries and stopping
//
// On activation the grain reads its stream and remembers the revision it saw.
// Every append passes that revision as the expected one. A wrong-revision
// error means another activation owns the stream now: the grain answers
// ABORTED to the command and to every command waiting (in its queue or
// already in its mailbox) and stops itself, without retrying; the caller's
// retry reaches the new owner. Any other append failure also stops it,
// since it cannot know whether the append landed; the next activation
// reads the truth. A command carries a request id (set by the control
// API) that its events record: a retry of a command whose answer was lost
// is answered from what the first run wrote (the secret of a create or a
// rotation included) instead of running twice.
//
// A grain that holds nothing (no command, no delivery, no recovery under
// way) and receives nothing for Config.IdleAfter passivates: it leaves
// memory, and the next wake or command activates it again, rebuilt from
// its stream. A paused endpoint holds nothing and is not woken (see the
// node's waker) until it resumes.
//
// # Structure
//
// The pure part, [State] (rebuilt by [State.Apply]) and [State.Decide]
// (validate a command and return the events it produces), has no I/O and no
// actor code. The actor ([Props], [NewKind]) processes one command at a time
// through a [command.Core] (the queue, the fenced append, the stop path it
// shares with the tenant grain): reading the stream, checking a URL against
// the egress policy (DNS) and appending run off the mailbox and come back
// on the actor, while later commands wait in order. Loading is
// asynchronous too, because an endpoint's stream has no bound worth
// trusting inside Receive.
package endpoint
