// Package clienttest holds the fixtures of the tests of the client, the
// outbox, the relay and the CLI, imported by tests only:
//
//   - Start (and Run, outside a test) runs a whole Hookline node in the
//     test's process (node.New) on the embedded log in a temporary
//     directory, on loopback ports the system chooses, with loopback
//     receivers allowed; Node.Published counts what its log accepted;
//   - NewOutbox gives a test an outbox table in a fresh schema on the
//     PostgreSQL server at HOOKLINE_POSTGRES_URL (skipping the test, saying
//     so, when it is not set), dropped at the end.
//
// protoactor-go keeps process-wide state, so one node at a time runs in a
// test process: tests that use Start do not run in parallel.
package clienttest
