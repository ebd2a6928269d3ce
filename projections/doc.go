// Package projections turns the log into the local, queryable state of a
// node: the endpoint registry (publish and authentication read it), the due
// index (endpoint grains pull their work from it) and the delivery history
// (the control API searches it). It sits between the log and its readers:
//
//	events.Log ──Subscribe──▶ Runner ──Apply──▶ registry, due, history ──▶ control, actors
//
// # Runner
//
// A [Runner] owns one Pebble database per node for all projections and one
// catch-up subscription over the whole log, unfiltered, from the smallest
// checkpoint of its projections. Each projection filters in memory (its
// [Projection.Filter]); only records that some projection wants are decoded,
// once. For every batch the log delivers, the runner applies the records and
// writes every projection's checkpoint (the batch's last position) in the same
// Pebble batch. Hence:
//
//   - each event is applied exactly once: a crash loses a batch and its
//     checkpoint together, and the batch is applied again on restart;
//   - every projection advances on every record, matching or not, so
//     [Runner.WaitFor] returns for any position, including one of an event no
//     projection cares about (an endpoint grain waits for the log position it
//     saw at activation);
//   - a deleted store (or a new projection) starts from [events.Start] and
//     rebuilds from the log;
//   - WaitFor is signalled after each committed batch; it never polls.
//
// Batches are committed without fsync: the store is a cache of the log, and
// Pebble's write-ahead log loses, at worst, a suffix of batches together with
// their checkpoints.
//
// # Key layout
//
//	c{name}         checkpoint of projection name: Commit, Prepare (2×8 bytes BE)
//	p{name}{key}    the projection's own keys (see its package)
//
// Names and other strings in keys are encoded with [AppendString]: escaped and
// terminated, so they keep their order and never run into the next part.
// Times use [AppendTime] or [AppendTimeDesc] (newest first), integers
// [AppendUint64].
package projections
