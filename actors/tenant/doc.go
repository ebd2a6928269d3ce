// Package tenant is the tenant grain: one virtual actor per tenant, of the
// cluster kind "tenant", identified by the tenant id.
//
// # Where it sits
//
// The control API (control) sends it a [internalv1.TenantCommand] and
// gets a [internalv1.TenantReply]: create a tenant, read it, issue and revoke
// API keys, change its quota. Endpoint grains (actors/endpoint) ask it for
// short leases of the tenant-wide quota ([internalv1.QuotaLeaseRequest]), so a
// tenant with thousands of busy endpoints cannot take the fleet. The registry
// projection reads the events it writes to authenticate API keys.
//
// # What it writes
//
// It is the single writer of the stream tenant-{tenant_id}: TenantCreated,
// TenantQuotaChanged, ApiKeyIssued and ApiKeyRevoked. An API key is shown once
// in the reply; the log holds only its SHA-256 ([HashKey]). Leases are memory
// only: they last about a second and are rebuilt by asking again.
//
// # Fencing, retries and stopping
//
// On activation the grain reads its stream and remembers the revision it saw.
// Every append passes that revision as the expected one. A wrong-revision
// error means another activation owns the stream now: the grain answers
// ABORTED to the command and to every command waiting, and stops itself,
// without retrying; the caller's retry reaches the new owner. A command's
// request id (set by the control API) is recorded in its events: a retry
// whose first run's answer was lost is answered from those events, except
// an API key, which the log holds only as a hash: the unseen key is
// revoked (REASON_UNSHOWN) and a new one issued to the retry
// ([State.Reissue]). A grain that receives nothing for Config.IdleAfter
// passivates; the next command activates it again.
//
// # Structure
//
// The pure part, [State] (rebuilt by [State.Apply]) and [State.Decide]
// (validate a command and return the events it produces), has no I/O and no
// actor code. The actor around it (see [Props] and [NewKind]) processes one
// command at a time through a [command.Core] (the queue, the fenced append
// and the stop path it shares with the endpoint grain): I/O (reading the
// stream, appending) runs off the mailbox and comes back on the actor,
// while later commands wait in order.
package tenant
