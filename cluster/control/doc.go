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
// (HOOKLINE_ADMIN_TOKEN) or a tenant API key, compared in constant time and
// looked up by hash. The same step admits the call under the bounds of
// calls in flight, per caller (a tenant's keys together, or the admin) and
// per node (limits.go), and REST caps each route's body at what it needs
// (gateway.go). A tenant key acts only on its own tenant: a resource of
// another tenant answers NOT_FOUND, never revealing that it exists, and
// endpoint ids a client chooses are scoped to its tenant, so that
// ALREADY_EXISTS reveals nothing either. Errors become gRPC status codes in
// one function (toStatus), with messages that name the field and the fix,
// REST parse errors included (decode.go); a rejected request writes
// nothing.
package control
