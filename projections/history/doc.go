// Package history is the projection of deliveries that the control API
// searches: GET /v1/webhook-deliveries by endpoint, status, event type and
// time, newest first, with opaque cursors, and GET
// /v1/webhook-deliveries/{id}, whose attempts it reads from the delivery's
// stream in the log ([History.Attempts]) rather than keeping a copy. It
// keeps 30 days.
//
//	DeliveriesPlanned, outcomes ─▶ projections.Runner ─▶ History ─▶ control (search, get)
//
// # Partitions: history stored once, searched from any node
//
// History is a partitioned projection: each node keeps the deliveries of
// the partitions it owns, so the cluster stores each delivery once (a node
// that lost a partition keeps its old copy until retention, but no longer
// serves it). A search is answered by any node: it asks every member to
// [History.Scan] the partitions it serves, after the cursor's key, and
// [Merge]s the parts. Index keys order deliveries the same way in every
// store, so the merged page is the one a single store holding everything
// would give (TestScatteredSearch checks page for page and cursor for
// cursor), and a cursor made by one node is valid on any other. A cluster
// asks each member for less than a page (about its share) and continues
// the parts that stopped too early ([Behind], [Partial.Continue]): the
// pages are still those of a single store.
//
// # Status
//
// A delivery is Pending from DeliveriesPlanned until an AttemptSucceeded
// (Succeeded) or a terminal AttemptFailed or DeliveryExpired (Failed).
// Succeeded is final. A manual replay that succeeds turns Failed into
// Succeeded; one that fails leaves it Failed. ReplayRequested only counts.
//
// # Searches
//
// Every delivery lives in the partition of the UTC day it was planned, so
// that retention drops a whole day with one range deletion; keys.go gives
// the key layout: a record per delivery and an index per kind of search,
// newest first.
//
// A search reads the one index that serves most of its filters, day by day
// from the newest, within its time range; an event type combined with an
// endpoint or a status is checked on each delivery read, within a scan
// budget (a page may then come back short, with a cursor to continue).
// Results with the same planned time come in delivery id order. A scan
// looks for one more match than the page holds, so a page is followed by a
// cursor only when more may come. Records are keyed by day and planned
// time like the indexes, so a scan reads a day's records with one iterator
// that only ever seeks forward, not a point read each.
//
// # Cursors
//
// A cursor is base64url of a version, a fingerprint of the query's filters,
// the index key to resume after (the last delivery of the page, or the
// frontier where the slowest scan stopped) and a checksum. Search rejects with
// [ErrBadCursor] a cursor that is damaged or altered, made for other filters
// or another tenant, or whose key lies outside the query's own index range;
// the last check is what makes a forged cursor harmless. Cursors stay valid
// across nodes (nothing secret, nothing node-local) and across new
// deliveries (pages go on from the last key).
//
// # Retention
//
// [History.Prune] deletes the deliveries planned before a cutoff: each
// whole day before the cutoff's day with one range deletion (after deleting
// its id entries), and the cutoff's own day delivery by delivery. It runs in
// short batches serialised with the runner. [History.Run] prunes every
// PruneEvery with cutoff now - Retention. Outcomes of pruned deliveries are
// skipped.
package history
