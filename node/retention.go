package node

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
)

// Tenants' own retention: a tenant may keep its events and deliveries
// shorter than the log does, and longer than the delivery deadline (so
// that no delivery still retrying loses its event to another partition's
// sweep). Every RetainEvery (a minute at most), each
// node finds, in its history, the ended deliveries of the partitions it
// serves that such a tenant planned before its cutoff, drops their
// delivery and event streams from the log (never archived: the tenant
// asked for them to be gone), then forgets them in the history. Pending
// deliveries wait until they end. The log's own retention pass comes
// later for every stream, so these never reach the archive.

// tenantRetentionEvery bounds how often the sweep runs.
const tenantRetentionEvery = time.Minute

// tenantRetentionBatch bounds the deliveries of one tenant one pass drops:
// a tenant that just shortened its retention is brought to it over several
// passes, each holding a bounded list.
const tenantRetentionBatch = 10_000

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
	for cursor := ""; ; {
		ts, next, err := s.registry.ListTenants(cursor, 500)
		if err != nil {
			return total, err
		}
		for _, t := range ts {
			if t.Retention <= 0 {
				continue
			}
			n, err := s.retainTenant(ctx, dropper, t)
			total += n
			if err != nil {
				return total, err
			}
		}
		if next == "" {
			return total, nil
		}
		cursor = next
	}
}

// retainTenant drops one tenant's ended deliveries planned before its
// cutoff, on the partitions this node serves.
func (s *Server) retainTenant(ctx context.Context, dropper events.StreamDropper, t registry.Tenant) (int, error) {
	cutoff := s.cfg.Now().Add(-t.Retention)
	q := history.Query{TenantID: t.ID, Until: cutoff, Limit: history.MaxLimit}
	var doomed []history.Delivery
	for {
		page, err := s.history.Search(q)
		if err != nil && !errors.Is(err, history.ErrIncomplete) {
			return 0, err
		}
		for _, d := range page.Deliveries {
			if (d.Status == history.Succeeded || d.Status == history.Failed) && s.parts.claims(events.PartitionOf(d.EndpointID)) {
				doomed = append(doomed, d)
			}
		}
		if page.Next == "" || len(doomed) >= tenantRetentionBatch {
			break
		}
		q.Cursor = page.Next
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	streams := make([]string, 0, 2*len(doomed))
	seen := map[string]bool{}
	for _, d := range doomed {
		streams = append(streams, events.DeliveryStream(d.ID))
		if es := events.EventStream(d.TenantID, d.EventID); !seen[es] {
			seen[es] = true
			streams = append(streams, es)
		}
	}
	if _, err := dropper.DropStreams(ctx, streams); err != nil {
		return 0, err
	}
	return len(doomed), s.history.Forget(ctx, doomed)
}
