// Package control is Hookline's control API: the gRPC services of
// proto/hookline/v1/control.proto and their REST gateway (grpc-gateway, paths
// in proto/hookline/v1/gateway.yaml). It sits between the network and the
// rest of the node:
//
//	client ─▶ gRPC / REST ─▶ control ─┬─▶ grains (commands: tenant, endpoint)
//	                                  ├─▶ events.Log (publish: one append)
//	                                  └─▶ projections (queries: registry, history)
//
// Every request but health checks is authenticated first, from its
// headers, before its body is read: over gRPC in the InTapHandle (tap),
// before the message is received, streams (reflection) included; over REST
// in guard, which answers 401 at once. The token is the admin token
// (HOOKLINE_ADMIN_TOKEN), a tenant API key, or a portal token (hlp_…, the
// tenant portal's short-lived access, portal.go), compared in constant time
// or looked up by hash: one local lookup, whatever the token, under a
// small bound of calls being authenticated at once. The same step admits
// the call under the bounds of calls in flight, per caller (a tenant's
// keys and portal tokens together, or the admin; a refusal carries a
// RetryInfo) and per node (limits.go), and REST caps each route's body at
// what it needs (gateway.go). A tenant key or portal token acts only on its own tenant: a
// resource of another tenant answers NOT_FOUND, never revealing that it
// exists, and endpoint ids a client chooses are scoped to its tenant, so
// that ALREADY_EXISTS reveals nothing either. A portal token may call only
// the RPCs of one table (capabilities.go), each with the capability it
// needs (read, manage_endpoints, replay).
//
// Besides the control API proper (control.proto), the server answers the
// API that the web console needed (console.proto): portal tokens and
// sessions (portal.go), the operator's tenants and cluster views
// (operator.go), the audit browser over the log (audit.go) and endpoint
// health (health.go). Errors become gRPC status codes in one function
// (toStatus), with messages that name the field and the fix, REST parse
// errors included (decode.go); a rejected request writes nothing.
package control
