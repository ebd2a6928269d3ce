package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookline/hookline/events"
)

// resumeEvery is how often the node wakes the endpoints it hosts whose bulk
// recovery is running.
const resumeEvery = 5 * time.Second

// resumeRecoveries wakes, every resumeEvery until ctx ends, the endpoints
// of this node's live partitions whose recovery has started and not
// finished (the registry tracks them). A recovery is carried out by its
// endpoint's grain, which resumes it on activation; after a restart or a
// failover nothing else may activate that grain (its list may hold no due
// delivery), so the node does. A wake to an active grain costs a pull.
func (s *Server) resumeRecoveries(ctx context.Context) error {
	t := time.NewTicker(resumeEvery)
	defer t.Stop()
	for {
		ids, err := s.registry.Recovering()
		if err != nil {
			s.logger.Warn("cannot list the endpoints whose recovery runs", slog.Any("error", err))
		}
		live := s.runner.Live()
		for _, id := range ids {
			if live.Has(events.PartitionOf(id)) {
				s.waker.Wake(id)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
