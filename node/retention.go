package node

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
)

// Tenants' own retention: a tenant may keep its events and deliveries
// shorter than the log does, and longer than the delivery deadline (so
// that no delivery still retrying loses its event to another partition's
// sweep). Every RetainEvery (a minute at most), each node finds, in its
// history, the ended deliveries of the partitions it serves that such a
// tenant planned before its cutoff, and drops from the log (never
// archived: the tenant asked for them to be gone) the streams of those
// whose event's whole plan has ended, on whichever member (see
// retention_plans.go): the event stream first, then their delivery
// streams; then it forgets them in the history. Pending deliveries wait
// until they end, and so do the ended deliveries of their events. The
// log's own retention pass comes later for every stream, so these never
// reach the archive; what it archived before a tenant shortened its
// retention is purged (purgeArchive). An ordered delivery waits too while
// its attempts may say its key's last sequence and the endpoint's
// ordering stream does not yet (due.Retains: within the checkpoint
// period), and while it is its key's parked head: the key's state is in
// no stream that outlives it, and a replay of the head sends its event.

// tenantRetentionEvery bounds how often the sweep runs.
const tenantRetentionEvery = time.Minute

// tenantRetentionBatch bounds the ended deliveries of one tenant one pass
// looks at: a tenant that just shortened its retention is brought to it
// over several passes, each holding a bounded list.
const tenantRetentionBatch = 10_000

// retentionSweep is where a tenant's retention goes on at its next pass:
// each pass looks at a bounded batch of its ended deliveries and the next
// resumes after it, back to the newest once it reached the oldest, so
// that deliveries kept for their event (another delivery of it still
// pending) do not hold every pass on the same batch. A sweep keeps the
// cutoff it started with (a later one would make another query, whose
// cursor this one's is not).
type retentionSweep struct {
	until  time.Time
	cursor string
}

// runTenantRetention sweeps until ctx ends.
func (s *Server) runTenantRetention(ctx context.Context) error {
	dropper, ok := s.rawLog.(events.StreamDropper)
	if !ok {
		return nil // KurrentDB: the log's own retention only
	}
	every := tenantRetentionEvery
	if s.cfg.RetainEvery > 0 {
		every = min(every, s.cfg.RetainEvery)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := s.tenantRetentionPass(ctx, dropper)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.logger.Error("tenant retention failed", slog.Any("error", err))
		case n > 0:
			s.logger.Info("tenant retention applied", slog.Int("deliveries", n))
		}
	}
}

// tenantRetentionPass applies every tenant's own retention once, and
// returns how many deliveries it dropped.
func (s *Server) tenantRetentionPass(ctx context.Context, dropper events.StreamDropper) (int, error) {
	total := 0
	retention := map[string]time.Duration{}
	silent := map[string]bool{} // members that did not answer in this pass: not asked again in it
	for cursor := ""; ; {
		ts, next, err := s.registry.ListTenants(cursor, 500)
		if err != nil {
			return total, err
		}
		for _, t := range ts {
			if t.Retention <= 0 {
				continue
			}
			retention[t.ID] = t.Retention
			n, err := s.retainTenant(ctx, dropper, t, silent)
			total += n
			if err != nil {
				return total, err
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for id := range s.sweeps {
		if _, ok := retention[id]; !ok {
			delete(s.sweeps, id)
		}
	}
	return total, s.purgeArchive(ctx, retention)
}

// archivePurgeEvery is how often the archive is purged of what tenants'
// own retention no longer keeps (streams archived before a tenant
// shortened its retention): a purge reads the whole bucket.
const archivePurgeEvery = time.Hour

// purgeArchive removes from the archive the streams of tenants whose own
// retention they outlived, on one node of the cluster (the one serving
// partition 1, the first): at once when the tenants' retentions changed,
// else at most every archivePurgeEvery.
func (s *Server) purgeArchive(ctx context.Context, retention map[string]time.Duration) error {
	now := s.cfg.Now()
	changed := !maps.Equal(retention, s.purgedFor)
	if s.archive == nil || len(retention) == 0 || !s.parts.claims(1) || (!changed && now.Sub(s.purged) < archivePurgeEvery) {
		return nil
	}
	s.purged, s.purgedFor = now, retention
	n, err := s.archive.Purge(ctx, func(stream string, recs []events.Record) bool {
		keep, ok := retention[tenantOf(stream, recs)]
		return ok && len(recs) > 0 && recs[len(recs)-1].Recorded.Before(now.Add(-keep))
	})
	if n > 0 {
		s.logger.Info("archive purged of tenants' expired streams", slog.Int("streams", n))
	}
	return err
}

// tenantOf names the tenant of an event or delivery stream: from an event
// stream's name, or from the tenant_id its records carry (themselves or in
// their attempt).
func tenantOf(stream string, recs []events.Record) string {
	if rest, ok := strings.CutPrefix(stream, events.EventCategory+"-"); ok {
		tenant, _, _ := strings.Cut(rest, ".")
		return tenant
	}
	for i := range recs {
		msg, err := events.Decode(&recs[i])
		if err != nil {
			continue
		}
		m := msg.ProtoReflect()
		if fd := m.Descriptor().Fields().ByName("tenant_id"); fd != nil && m.Get(fd).String() != "" {
			return m.Get(fd).String()
		}
		if fd := m.Descriptor().Fields().ByName("attempt"); fd != nil && m.Has(fd) {
			a := m.Get(fd).Message()
			if td := a.Descriptor().Fields().ByName("tenant_id"); td != nil && a.Get(td).String() != "" {
				return a.Get(td).String()
			}
		}
	}
	return ""
}

// retainTenant drops one tenant's ended deliveries planned before its
// cutoff, on the partitions this node serves, whose events' plans have
// ended wherever they are served (the members in silent are not asked,
// and those that do not answer are added to it); it returns how many it
// dropped.
func (s *Server) retainTenant(ctx context.Context, dropper events.StreamDropper, t registry.Tenant, silent map[string]bool) (int, error) {
	ended, err := s.endedBefore(t)
	if err != nil || len(ended) == 0 {
		return 0, err
	}
	done, err := s.plansEnded(ctx, t.ID, ended, silent)
	if err != nil {
		return 0, err
	}
	var doomed []history.Delivery
	var streams []string // the event streams first: never a plan without the streams that end it
	seen := map[string]bool{}
	for _, d := range ended {
		es := events.EventStream(d.TenantID, d.EventID)
		if !done[es] {
			continue
		}
		doomed = append(doomed, d)
		if !seen[es] {
			seen[es] = true
			streams = append(streams, es)
		}
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	for _, d := range doomed {
		streams = append(streams, events.DeliveryStream(d.ID))
	}
	if _, err := dropper.DropStreams(ctx, streams); err != nil {
		return 0, err
	}
	return len(doomed), s.history.Forget(ctx, doomed)
}

// endedBefore returns the next batch of one tenant's ended deliveries
// planned before its cutoff, on the partitions this node serves, that
// their key does not retain (orderRetains), continuing the tenant's sweep.
func (s *Server) endedBefore(t registry.Tenant) ([]history.Delivery, error) {
	cutoff := s.cfg.Now().Add(-t.Retention)
	sw := s.sweeps[t.ID]
	if sw.cursor == "" || sw.until.After(cutoff) { // a new sweep, or a retention made longer
		sw = retentionSweep{until: cutoff}
	}
	q := history.Query{TenantID: t.ID, Until: sw.until, Limit: history.MaxLimit, Cursor: sw.cursor}
	var ended []history.Delivery
	for {
		page, err := s.history.Search(q)
		if err != nil && !errors.Is(err, history.ErrIncomplete) {
			delete(s.sweeps, t.ID)
			return nil, err
		}
		for _, d := range page.Deliveries {
			if (d.Status == history.Succeeded || d.Status == history.Failed) && s.parts.claims(events.PartitionOf(d.EndpointID)) {
				keep, err := s.orderRetains(d)
				if err != nil {
					return nil, err
				}
				if !keep {
					ended = append(ended, d)
				}
			}
		}
		q.Cursor = page.Next
		if page.Next == "" || len(ended) >= tenantRetentionBatch {
			break
		}
	}
	if q.Cursor == "" {
		delete(s.sweeps, t.ID)
	} else {
		if s.sweeps == nil {
			s.sweeps = map[string]retentionSweep{}
		}
		s.sweeps[t.ID] = retentionSweep{until: sw.until, cursor: q.Cursor}
	}
	return ended, nil
}

// orderRetains reports whether an ended delivery of an endpoint ordered by
// key must stay in the log for now: its attempts may carry its key's last
// sequence, not checkpointed yet, or it is its key's parked head.
func (s *Server) orderRetains(d history.Delivery) (bool, error) {
	if d.OrderingKey != "" && d.Sequence > 0 && s.due.Retains(d.EndpointID, d.LastAttemptAt) {
		return true, nil
	}
	return s.parkedHead(d)
}

// parkedHead reports whether an ended delivery is its ordering key's
// parked head: the key waits for a replay of it to succeed, or for a
// person to skip it.
func (s *Server) parkedHead(d history.Delivery) (bool, error) {
	if d.OrderingKey == "" {
		return false, nil
	}
	k, ok, err := s.due.Key(d.EndpointID, d.OrderingKey)
	return ok && k.Head == d.ID, err
}

// checkpointAfter is how long an ordered key's last sequence may wait
// before its endpoint checkpoints it: due's default, or a quarter of the
// log's retention when that is shorter, so that the checkpoint always
// comes before the log's own retention drops what it covers.
func checkpointAfter(retention time.Duration) time.Duration {
	if retention > 0 && retention/4 < due.DefaultCheckpointAfter {
		return retention / 4
	}
	return due.DefaultCheckpointAfter
}
