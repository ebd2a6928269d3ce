// Package grain holds what the tenant and endpoint grains share: running
// I/O off the mailbox and taking its result back on the actor, encoding a
// command's events with fenced deterministic ids, and what an append's
// failure means for the grain that made it. It sits under actors/tenant and
// actors/endpoint and imports only events and protoactor.
package grain
