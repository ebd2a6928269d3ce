// Package endpoint is the endpoint grain: one virtual actor per endpoint, of
// the cluster kind "endpoint", identified by the endpoint id.
//
// # Where it sits
//
// The control API (cluster/control) sends it a [controlv1.EndpointCommand]
// and gets a [controlv1.EndpointReply]: create, read, update (a new
// config_version), rotate and retire signing secrets, pause, resume, delete.
// The publish handler and the due projection send it Wake hints, which the
// delivery loop answers (loop.go): it pulls due deliveries from the due
// projection, attempts them through actors/attempt within the endpoint's
// limits (circuit breaker, token bucket, in-flight limit, tenant quota
// lease, a slot from the node's actors/dispatch), and records each outcome
// on the delivery's stream. It also carries out manual replays
// (replay.go) and bulk recoveries (recover.go). Without Config.Due the
// loop is off and the grain only answers commands.
//
// # What it writes
//
// It is the single writer of endpoint-{endpoint_id}: EndpointCreated
// (config_version 1), EndpointUpdated (config_version+1 and the whole new
// config), SecretRotated, SecretRetired, EndpointPaused, EndpointResumed and
// EndpointDeleted, and for the delivery loop CircuitOpened,
// CircuitHalfOpened, CircuitClosed and EndpointPaused (REASON_GONE on a
// 410). It is also the single writer of the delivery-{delivery_id} streams
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
// # Fencing
//
// On activation the grain reads its stream and remembers the revision it saw.
// Every append passes that revision as the expected one. A wrong-revision
// error means another activation owns the stream now: the grain answers
// ABORTED to the command (and to every command waiting) and stops itself,
// without retrying; the caller's retry reaches the new owner. Any other
// append failure also stops it, since it cannot know whether the append
// landed; the next activation reads the truth.
//
// # Structure
//
// The pure part, [State] (rebuilt by [State.Apply]) and [State.Decide]
// (validate a command and return the events it produces), has no I/O and no
// actor code. The actor ([Props], [NewKind]) processes one command at a time:
// reading the stream, checking a URL against the egress policy (DNS) and
// appending run off the mailbox and come back through ReenterAfter, while
// later commands wait in order. Loading is asynchronous too, because an
// endpoint's stream has no bound worth trusting inside Receive.
package endpoint
