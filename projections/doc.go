// Package projections turns the log into the local, queryable state of a
// node: the endpoint registry (publish and authentication read it), the due
// index (endpoint grains pull their work from it) and the delivery history
// (the control API searches it, across the cluster's nodes). It sits between
// the log and its readers:
//
//	events.Log ──Subscribe──▶ Runner ──Apply──▶ registry, due, history ──▶ control, actors
//
// # Partitions
//
// The delivery work of a cluster is split into events.Partitions partitions
// by endpoint (events.PartitionOf), and each partition has one owner node,
// placed by the cluster. Projections come in two kinds:
//
//   - global ones (registry) apply the records of no partition: tenants,
//     endpoints, keys; every node keeps all of them, they are few;
//   - [Partitioned] ones (due, history, the outcome metrics) apply the
//     records of the partitions the node owns ([Runner.Own]), besides those
//     of no partition. A node applies its share of the delivery records,
//     not all of them, and reads only its share from the log where the
//     backend filters on the server (PostgreSQL: the part column).
//
// # Runner and lanes
//
// A [Runner] owns one Pebble database per node for all projections and
// reads the log through lanes, each a filtered subscription:
//
//   - the main lane applies the records of no partition and of the live
//     partitions, from the main position on; [Runner.WaitFor] and
//     [Runner.Applied] speak of it;
//   - the catch-up lane applies the records of the partitions the node
//     gained and that are not live yet, from their smallest checkpoint. A
//     partition goes live (PartitionsChanged tells the partitioned
//     projections) once every projection's checkpoint in it has reached the
//     main position: the main lane takes it from there. The catch-up lane
//     then ends; the main lane starts again with the new set.
//
// A partition the node loses stops at once: its checkpoint stays where it
// was, and its state stays in the store, so that the partition resumes
// from there if it comes back. Every change of the sets, and every batch,
// happens under one lock, so no record is applied twice or skipped across
// them (TestRunnerPartitionsUnderChurn).
//
// # Checkpoints
//
// Each projection has a checkpoint per partition (one for the records of
// no partition), written in the same Pebble batch as the state it covers,
// grouped by position (most partitions share one). Hence:
//
//   - each event is applied exactly once: a crash loses a batch and its
//     checkpoints together, and the batch is applied again on restart;
//   - a lane advances its partitions' checkpoints on every record it reads,
//     matching or not, and the log tells a subscriber how far it has read
//     even past records its filter leaves out, so [Runner.WaitFor] returns
//     for any position, including one of an event no projection cares about
//     (an endpoint grain waits for the log position it saw at activation);
//     progress over records that change nothing is written at most once a
//     second;
//   - a deleted store (or a new projection) starts from [events.Start] and
//     rebuilds from the log;
//   - WaitFor is signalled after each committed batch; it never polls.
//
// Batches are committed without fsync and without a write-ahead log: the
// store is a cache of the log. A crash loses the memtables not yet flushed,
// a suffix of batches together with their checkpoints, which the runner
// applies again on restart (seconds of log at most); a clean Close flushes
// first.
//
// # Key layout
//
//	c{name}         checkpoints of projection name (checkpoint.go)
//	p{name}{key}    the projection's own keys (see its package)
//
// Names and other strings in keys are encoded with [AppendString]: escaped and
// terminated, so they keep their order and never run into the next part.
// Times use [AppendTime] or [AppendTimeDesc] (newest first), integers
// [AppendUint64].
package projections
