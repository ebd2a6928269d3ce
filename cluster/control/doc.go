// Package control is Hookline's control API: the gRPC services of
// proto/hookline/v1/control.proto and their REST gateway (grpc-gateway, paths
// in proto/hookline/v1/gateway.yaml). It sits between the network and the
// rest of the node:
//
//	client ─▶ gRPC / REST ─▶ control ─┬─▶ grains (commands: tenant, endpoint)
//	                                  ├─▶ events.Log (publish: one append)
//	                                  └─▶ projections (queries: registry, history)
//
// Every request is authenticated first (authenticate): the admin token
// (HOOKLINE_ADMIN_TOKEN) or a tenant API key, compared in constant time and
// looked up by hash. A tenant key acts only on its own tenant: a resource of
// another tenant answers NOT_FOUND, never revealing that it exists. Errors
// become gRPC status codes in one function (status), with messages that name
// the field and the fix; a rejected request writes nothing.
package control
