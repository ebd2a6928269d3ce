// Package client is the Go client of Hookline's control API, for producers
// (publishing events) and operators (tenants, API keys, endpoints,
// deliveries). It wraps the generated gRPC stubs of
// proto/hookline/v1/control.proto with what every caller would otherwise
// write again: the bearer token, TLS, a deadline on every attempt, retries
// of the calls that are safe to repeat, batches split at the server's
// limits, iterators over paged searches, and errors that errors.Is can test.
//
//	producer ─▶ client ─▶ gRPC ─▶ control ─▶ log, grains, projections
//
// # Where it sits, and why
//
// It is a top-level package, like verify for receivers, not under cluster/
// or cmd/: producers import it into their own services, so it imports only
// gRPC, protobuf and the generated stubs (whose package also holds the REST
// gateway's generated handlers, hence grpc-gateway's runtime), never the
// node (no Pebble, no protoactor, no pgx). cmd/hookline's client commands
// and the outbox relay (client/outbox/relay) are built on it; the outbox
// table and its insert helper (client/outbox) do not need it.
//
// # Retries
//
// A call is sent again, with exponential backoff and full jitter
// (Config.BackoffBase doubling up to Config.BackoffCap, at most
// Config.MaxAttempts attempts, never past the caller's deadline), when its
// outcome is unknown or it surely did nothing, and repeating it cannot do
// anything twice:
//
//   - on UNAVAILABLE (no connection, a connection lost mid-call, a node
//     shutting down), on ABORTED (the server's "a concurrent change won;
//     retry"), and on DEADLINE_EXCEEDED of one attempt while the caller's
//     own context is still alive: the answer was lost;
//   - for idempotent calls only: Publish and PublishBatch (publishing is
//     idempotent by event id: an event accepted by the lost attempt is
//     answered as a duplicate with its original plan, and nothing new is
//     written), LookupEvents, every Get and List, and the calls that set a
//     state (UpdateEndpoint, PauseEndpoint, ResumeEndpoint, DeleteEndpoint,
//     RetireSecret, RevokeAPIKey, SetQuota: doing one twice leaves the same
//     state).
//
// Calls that would do something again are never retried by this package:
// CreateTenant and CreateEndpoint (a generated id would make a second one,
// a given id an ALREADY_EXISTS that hides the first success), IssueAPIKey
// and RotateSecret (a second key or secret), RecoverEndpoint (a second
// job), ReplayDelivery (a second manual attempt). gRPC itself still
// re-sends any call that provably never reached the server, and this
// package any call refused for the caller's limit of calls in flight
// (RESOURCE_EXHAUSTED with a RetryInfo, [ErrLimited]): nothing was done,
// and it waits at least the delay the node advised. That refusal is never
// read as a batch too large.
//
// Because a retried Publish is answered from the stream, a response can say
// Duplicate for an event that this very call accepted on an attempt whose
// answer was lost.
//
// # Errors
//
// A failed call returns a *[Error] (its gRPC code and message), which
// errors.Is matches against this package's sentinels ([ErrInvalid],
// [ErrNotFound], [ErrConflict], ...) and against context.DeadlineExceeded
// and context.Canceled; status.Code from grpc works on it too. Errors that
// never reached gRPC (a bad argument to PublishBatch, a closed Client) are
// plain wrapped errors.
//
// # Transport security
//
// TLS is the default. Config.CAFile trusts a private CA (the CLI's --ca);
// Config.TLS takes a whole tls.Config (client certificates, a server name).
// Plaintext is used only when the address is loopback (127.0.0.0/8, ::1,
// localhost: a node on the same machine, as `hookline serve` binds by
// default) and no TLS option is set, or when Config.Plaintext says so for
// another host (a private network, a sidecar that terminates TLS). The
// token is never logged.
package client
