// Package eventtype is the grammar of event types and of the entries an
// endpoint subscribes with, and the one rule that matches them. Publish
// plans by it (through the registry's index), reconciliation rebuilds the
// subscriptions of a publish's moment by it, and a routing explanation
// names the entry it picked: all three call [Patterns], so they cannot
// disagree.
//
//	control (create, update)  ─▶ CheckEntry: a field error naming the entry
//	control (publish, catalog) ─▶ Check: a concrete type, never a pattern
//	projections/registry       ─▶ Patterns(type): the index keys to read
//	reconcile, control routing ─▶ Match(entries, type): the entry that matched
//
// # The rule
//
// An event type is one to 128 characters: segments of letters, digits,
// '_' and '-', separated by single dots (invoice.paid). An endpoint's
// entry is an event type, which matches that type only; a prefix pattern,
// an event type followed by ".*" (order.*), which matches every type that
// starts with the prefix and a dot, at any depth (order.paid,
// order.item.added, not order); or "*" ([All]), which matches every type
// but Hookline's own operational ones ([Reserved]): those reach only the
// endpoints that name them, or name hookline.*. An endpoint with no entry
// subscribes as "*" does.
//
// The package imports only the standard library; it is safe for
// concurrent use.
package eventtype
