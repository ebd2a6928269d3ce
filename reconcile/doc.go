// Package reconcile compares every durable boundary of Hookline with the
// log, which is the truth, and repairs what can be repaired without
// creating a second logical delivery. It sits beside the projections,
// reading the log and what the node holds:
//
//	events.Log ──read up to a head──▶ Reconciler ◀── registry, due, history (the node's)
//	                                       │   ◀── a fresh replay of the log (check 5)
//	                                       └──▶ report; repairs: DeliveriesPlanned, wakes, Runner.Rebuild
//
// # The checks
//
// A run reads the log up to one position, its head, and compares:
//
//  1. plans: every EventPublished with its DeliveriesPlanned chunks and
//     with the subscriptions of its time, rebuilt from the endpoint streams
//     up to its position: plan_short (a subscribed endpoint not planned),
//     plan_missing, plan_incomplete (chunks missing), plan_unsubscribed (a
//     delivery to an endpoint not subscribed then), plan_config_version;
//  2. deliveries: every planned delivery against its delivery stream and
//     the due index: a delivery that the log leaves pending must be in the
//     index (in flight items stay there), one it ended must not be; else
//     delivery_stranded (neither due, in flight nor ended) or
//     due_after_end;
//  3. grains: due work against the grains that should pull it: work due
//     for longer than NotPulledAfter on an endpoint whose grain has not
//     pulled for as long (its circuit not open) is due_not_pulled; due
//     work of a deleted endpoint is due_deleted_endpoint; that of a paused
//     or disabled one is counted as held (it waits for a resume, by the
//     tenant's decision), not a discrepancy;
//  4. attempts: ended deliveries against their attempts, in the log
//     (numbers 1..n, a DeliveryExpired's count, at most one automatic
//     success) and in the history (status, attempt count, a success
//     without an attempt);
//  5. projections: the node's registry, due index and history against a
//     replay of the log into fresh in-memory projections, by the very same
//     code: entry counts, a digest of each side, and every entry that
//     differs;
//  6. archive: every delivery the history holds whose plan is past the
//     log's retention has its event in the log or the archive
//     (archive_missing otherwise); only with an archive.
//
// Deliveries planned before the log's retention (Config.LogRetention) are
// compared only by check 6: the log no longer holds them, whatever the
// history says.
//
// Checks 2 to 6 run on the owner of each partition ([Reconciler.Part]):
// in a cluster every member reconciles the partitions it serves and the
// node that was asked merges the parts; check 1 runs once
// ([Reconciler.Plans]).
//
// # A live node
//
// Everything at or before the head is compared once the node's
// projections have applied it. A delivery, endpoint or event whose streams
// moved past the head while the run compared it is "moving": its
// projections legitimately differ from the head's picture, so it is
// counted apart and never reported. A discrepancy is reported only when
// the streams that decide it stood still.
//
// # Repairs
//
// With repair, each repairable discrepancy is fixed, and each repair is
// recorded as a ReconcileRepaired event with its reason in the run's
// stream (reconcile-{run_id}.plans for the re-plans,
// reconcile-{run_id}.{node} for a node's partitions):
//
//   - plan_short, plan_missing, plan_incomplete: the missing deliveries are
//     planned from the snapshot of the publish's time, with their
//     deterministic ids, skipping any whose delivery stream exists: no
//     second logical delivery is made;
//   - due_not_pulled, due_deleted_endpoint: the endpoint's grain is woken;
//   - delivery_stranded, due_after_end, a divergent projection: it is
//     rebuilt from the log (projections.Runner.Rebuild); the registry only
//     on a stopped node.
//
// What the log itself says wrong (attempt numbering, a delivery planned to
// an endpoint that was not subscribed) is reported for people: the log is
// the truth.
//
// # Cost
//
// A run reads the log once for the plans and once per node for its
// partitions, and replays each node's share into memory (Run.SkipReplay
// leaves check 5 out): time and memory grow linearly with the log; figures
// are in docs/. The background checks ([Background]) are the cheap ones:
// due work nobody pulls, due work of deleted endpoints, and the plans of
// the publishes since their last run.
package reconcile
