// Package eventstest is the conformance suite of events.Log: every backend
// (events/embedded, events/esdb, events/postgres) calls [Run] from its tests,
// so that the rest of Hookline can rely on one behaviour whatever the store.
//
// The suite may run against a log shared with other tests and other runs (a
// real EventStoreDB server, say). So each case writes only to its own
// streams, named from a random per-run prefix and the case's name, and the
// cases that read or subscribe to the whole log filter on their own streams
// and tolerate foreign events between them. Cases run in parallel and never
// sleep to synchronise: they wait on the subscription itself, on channels, or
// under a deadline.
package eventstest
