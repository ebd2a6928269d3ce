package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Projections is a set of the node's projections (registry, due index,
// history) with a runner of their own, applied to a log for a reconcile:
// the fresh in-memory replay it compares the node's with, or the store of
// a stopped node. Close it when done.
type Projections struct {
	Runner   *projections.Runner
	Registry *registry.Registry
	Due      *due.Due
	History  *history.History
	stop     context.CancelFunc
	done     chan error
}

// OpenProjections opens projections on cfg's store, applying every
// partition of parts (and the records of no partition) from log, and
// returns once they have reached head. They keep following the log until
// closed.
func OpenProjections(ctx context.Context, log events.Log, cfg projections.Config, parts events.PartitionSet, head events.Position) (_ *Projections, err error) {
	runner, err := projections.Open(log, cfg)
	if err != nil {
		return nil, err
	}
	ps := &Projections{Runner: runner, done: make(chan error, 1)}
	defer func() {
		if err != nil {
			ps.Close()
		}
	}()
	if ps.Registry, err = registry.New(runner); err != nil {
		return nil, err
	}
	if ps.Due, err = due.New(runner, due.Config{Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if ps.History, err = history.New(runner, history.Config{Log: log, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	runner.Own(parts)
	rctx, cancel := context.WithCancel(context.Background())
	ps.stop = cancel
	go func() { ps.done <- runner.Run(rctx) }()
	withNone := parts
	withNone.Add(events.NoPartition)
	if err := runner.WaitForPartitions(ctx, withNone, head); err != nil {
		return nil, fmt.Errorf("bring the projections up to the log: %w", err)
	}
	return ps, nil
}

// Close stops the runner and closes the store.
func (ps *Projections) Close() {
	if ps.stop != nil {
		ps.stop()
		<-ps.done
	}
	_ = ps.Runner.Close()
}

// startReplay applies the log to fresh projections of parts, in memory,
// and returns once they have reached head: what the node should hold.
func startReplay(ctx context.Context, log events.Log, head events.Position, parts events.PartitionSet) (*Projections, error) {
	quiet := slog.New(slog.DiscardHandler)
	return OpenProjections(ctx, log, projections.Config{Dir: "replay", FS: vfs.NewMem(), Logger: quiet}, parts, head)
}

// replaying is a replay started beside the scan of a Part.
type replaying struct {
	rp   *Projections
	err  error
	done chan struct{}
}

// startReplayAside starts the replay of run (none when it skips it) in a
// goroutine that close waits for.
func startReplayAside(ctx context.Context, log events.Log, run Run, parts events.PartitionSet) *replaying {
	w := &replaying{done: make(chan struct{})}
	if run.SkipReplay {
		close(w.done)
		return w
	}
	go func() {
		defer close(w.done)
		w.rp, w.err = startReplay(ctx, log, run.Head, parts)
	}()
	return w
}

// wait returns the replay once it has reached the head.
func (w *replaying) wait() (*Projections, error) {
	<-w.done
	return w.rp, w.err
}

func (w *replaying) close() {
	if rp, _ := w.wait(); rp != nil {
		rp.Close()
	}
}

// compare is check 5: the node's registry, due index and history against
// the replay's, entry by entry.
func (r *Reconciler) compare(ctx context.Context, p *tally, l *local, rp *Projections) error {
	if err := r.compareDue(ctx, p, l, rp); err != nil {
		return err
	}
	if err := r.compareHistory(ctx, p, l, rp); err != nil {
		return err
	}
	return r.compareRegistry(ctx, p, l, rp)
}

// compareDue compares the due index of l's partitions.
func (r *Reconciler) compareDue(ctx context.Context, p *tally, l *local, rp *Projections) error {
	items, err := dueItems(rp.Due, l.parts)
	if err != nil {
		return fmt.Errorf("read the replay's due index: %w", err)
	}
	return compareOne(r, p, l, due.Name, l.items, items, encodeItem, func(id string) (bool, error) {
		it, ok := l.items[id]
		if !ok {
			it = items[id]
		}
		return r.moved(ctx, l, &delivery{tenant: it.TenantID, event: it.EventID}, id)
	})
}

// compareHistory compares the history of l's partitions, within its
// retention.
func (r *Reconciler) compareHistory(ctx context.Context, p *tally, l *local, rp *Projections) error {
	records, err := historyRecords(rp.History, l.parts, l.cutoff)
	if err != nil {
		return fmt.Errorf("read the replay's history: %w", err)
	}
	node := map[string]history.Delivery{}
	for id, d := range l.records {
		if !d.PlannedAt.Before(l.cutoff) {
			node[id] = d
		}
	}
	return compareOne(r, p, l, history.Name, node, records, encodeRecord, func(id string) (bool, error) {
		d, ok := node[id]
		if !ok {
			d = records[id]
		}
		return r.moved(ctx, l, &delivery{tenant: d.TenantID, event: d.EventID}, id)
	})
}

// compareRegistry compares every tenant and endpoint the log knows.
func (r *Reconciler) compareRegistry(ctx context.Context, p *tally, l *local, rp *Projections) error {
	regs := [2]*registry.Registry{r.cfg.Registry, rp.Registry}
	entries := [2]map[string]string{{}, {}} // the node's, the replay's
	streams := map[string]string{}
	// read adds, for each side, the entry that get finds there.
	read := func(key, stream string, get func(*registry.Registry) (string, bool, error)) error {
		streams[key] = stream
		for i, reg := range regs {
			v, ok, err := get(reg)
			if err != nil {
				return err
			}
			if ok {
				entries[i][key] = v
			}
		}
		return nil
	}
	for id := range l.subs.endpoints {
		err := read("endpoint "+id, events.EndpointStream(id), func(reg *registry.Registry) (string, bool, error) {
			e, ok, err := reg.Endpoint(id)
			return encodeEndpoint(e), ok, err
		})
		if err != nil {
			return err
		}
	}
	for id := range l.tenants {
		err := read("tenant "+id, events.TenantStream(id), func(reg *registry.Registry) (string, bool, error) {
			t, ok, err := reg.Tenant(id)
			return encodeTenant(t), ok, err
		})
		if err != nil {
			return err
		}
	}
	return compareOne(r, p, l, registry.Name, entries[0], entries[1], func(s string) []byte { return []byte(s) }, func(key string) (bool, error) {
		return movedPast(ctx, r.cfg.Log, l.run.Head, streams[key])
	})
}

// compareOne compares one projection's entries, by key, with the
// replay's: entries that differ and did not move make one
// projection_diverged discrepancy; the digests cover the entries that did
// not move.
func compareOne[V any](r *Reconciler, p *tally, l *local, name string, node, replayed map[string]V, enc func(V) []byte, moved func(key string) (bool, error)) error {
	keys := map[string]bool{}
	for k := range node {
		keys[k] = true
	}
	for k := range replayed {
		keys[k] = true
	}
	p.examined(CheckProjections, len(keys))
	var differing []string
	skip := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		a, inNode := node[k]
		b, inReplay := replayed[k]
		if inNode == inReplay && bytes.Equal(enc(a), enc(b)) {
			continue
		}
		m, err := moved(k)
		if err != nil {
			return err
		}
		if m {
			skip[k] = true
			continue
		}
		differing = append(differing, k)
	}
	dg := &controlv1.ProjectionDigest{
		Name: name, Node: r.cfg.Node, Partitions: l.parts.String(),
		NodeEntries: int64(len(node)), ReplayEntries: int64(len(replayed)),
		NodeDigest: digest(node, skip, enc), ReplayDigest: digest(replayed, skip, enc),
		Differing: int64(len(differing)), Moving: int64(len(skip)),
	}
	p.digests = append(p.digests, dg)
	if len(differing) == 0 {
		return nil
	}
	d := &controlv1.Discrepancy{Kind: KindProjectionDiverged, Check: CheckProjections,
		Detail: fmt.Sprintf("%d entries of the %s projection differ from a replay of the log (digests %s here, %s replayed), first %s",
			len(differing), name, dg.NodeDigest, dg.ReplayDigest, differing[0])}
	for _, k := range differing[:min(len(differing), 20)] {
		d.DeliveryIds = append(d.DeliveryIds, k)
	}
	r.addRebuild(p, l, name, d)
	return nil
}

// digest hashes the entries not skipped, in key order.
func digest[V any](m map[string]V, skip map[string]bool, enc func(V) []byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if skip[k] {
			continue
		}
		fmt.Fprintf(h, "%d:%s", len(k), k)
		v := enc(m[k])
		fmt.Fprintf(h, "%d:", len(v))
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func encodeItem(it due.Item) []byte {
	return fmt.Appendf(nil, "%s|%s|%s|%s|%s|%d|%d|%t|%d|%d|%d|%d|%d|%q|%d|%t", it.DeliveryID, it.TenantID, it.EventID, it.EventType, it.EndpointID,
		it.ConfigVersion, it.Class, it.Manual, it.DueAt.UnixNano(), it.PlannedAt.UnixNano(), it.ExpiresAt.UnixNano(), it.Attempts,
		it.Ordering, it.OrderingKey, it.Sequence, it.Waiting)
}

func encodeRecord(d history.Delivery) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(d.Record())
	return b
}

func encodeTenant(t registry.Tenant) string {
	return fmt.Sprintf("%s|%s|%g|%d|%d|%d", t.ID, t.Name, t.Quota.AttemptsPerSecond, t.Quota.MaxInFlight, t.Quota.Weight, t.CreatedAt.UnixNano())
}

func encodeEndpoint(e registry.Endpoint) string {
	cfg, _ := proto.MarshalOptions{Deterministic: true}.Marshal(e.Config)
	return fmt.Sprintf("%s|%s|%d|%x|%v|%t|%d|%t|%s|%t|%d|%d", e.ID, e.TenantID, e.ConfigVersion, cfg, e.SecretVersions,
		e.Paused, e.PauseReason, e.Disabled, e.DisabledReason, e.Deleted, e.CreatedAt.UnixNano(), e.UpdatedAt.UnixNano())
}
