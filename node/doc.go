// Package node assembles one Hookline node: the log, the projections, the
// grain kinds, the cluster member, the control API with its REST gateway
// and console, and the services beside them. It is the composition root:
// cmd/hookline fills a [Config], calls [New] and runs [Server.Run].
//
// # Where it sits
//
//	cmd/hookline ─▶ node ─▶ control, console      (the API)
//	                  ├──▶ actors, dispatch, attempt, seal (delivery)
//	                  ├──▶ projections, reconcile, operational
//	                  ├──▶ cluster                (membership, placement)
//	                  └──▶ events/{embedded,postgres,esdb}
//
// [New] builds the node in named steps (open the log, check the master
// key, open the projections, start the cluster member and its services,
// build the API, bind the listeners); a failed step releases what the
// earlier ones acquired. [Server.Run] serves until its context ends, then
// stops gracefully: the API refuses new calls, running attempts finish and
// are recorded (at most 15 s), the member leaves the cluster, and the
// projections and the log close.
//
// # The node's services
//
// Beside the grains, every member runs a few named services (see
// cluster.Node.Serve) for what crosses members without being a grain
// command:
//
//   - history: a delivery search asks every member for its partitions'
//     part and merges them by index key, so any node answers with the same
//     pages and cursors (history.go);
//   - retention: a tenant's own retention asks the members serving an
//     event's other deliveries whether they ended before it drops the
//     event (retention_plans.go);
//   - reconcile: every member reconciles the partitions it owns and the
//     member asked merges the parts (reconcile.go);
//   - settle: a command that changes the registry answers once every
//     member has applied it (settle.go);
//   - status: the operator's view of every member (status.go);
//   - hand-over: a publish hands its planned deliveries to the endpoint
//     grains of their partitions' owners before the projections apply the
//     plan (planned.go).
//
// The waker (waker.go) wakes endpoint grains for the due projection, the
// pulls (pulls.go) note when each endpoint last pulled, and the metrics
// (metrics.go) are served at /metrics.
//
// The design is in docs/architecture.md; running a node safely in
// docs/operations.md.
package node
