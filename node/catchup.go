package node

import (
	"context"
	"sync"

	"github.com/hookline/hookline/events"
)

// How far a starting endpoint grain waits for the projections.
//
// A grain must not start before its node's projections hold every record
// of its partition that an earlier grain of the endpoint appended: it
// would take an attempted delivery for a new one and attempt it again.
// Those records were appended by
//
//   - the partition's previous owner, before the table gave the partition
//     to this node: the hand-over's or the takeover's record in the table
//     comes after them (a member taken over is gone, or no longer serves
//     the partition once it sees the table), but for the outcomes of the
//     attempts a hand-over lists as still running, which the grain waits
//     for by delivery (Config.StillRunning, ADR 0063);
//   - this process's own grains of the partition (one passivated, or
//     stopped when the partition left and started again when it came
//     back, which the placement does only once the one that retired has
//     stopped): appendMarks keeps where their last append landed;
//   - this node's previous process, before a restart: the log's head when
//     this process opened it is past them.
//
// The grain waits for the furthest of the three, not for the log's head:
// the head moves on with every publish and every other partition's
// outcome, and under load the projections trail it by their lag, which a
// grain started by a hand-over would add to the move's pause.

// appendMarks is, for every delivery partition, where this node's endpoint
// grains' last append to a record of that partition landed, or that one
// failed (it may have landed anywhere: the grain waits for the head).
type appendMarks struct {
	mu      sync.Mutex
	at      [events.Partitions + 1]events.Position
	unknown [events.Partitions + 1]bool
}

// note records an append of evs that ended at pos, or failed.
func (m *appendMarks) note(evs []events.Event, pos events.Position, failed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range evs {
		p := ev.Partition
		if p == events.NoPartition || !p.Valid() {
			continue
		}
		switch {
		case failed:
			m.unknown[p] = true
		case m.at[p].Less(pos):
			m.at[p] = pos
		}
	}
}

// in returns the last append of partition p, and whether it is known.
func (m *appendMarks) in(p events.Partition) (events.Position, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.at[p], !m.unknown[p]
}

// markedLog is the log as the endpoint grains see it: their appends are
// noted in marks.
type markedLog struct {
	events.Log
	marks *appendMarks
}

func (l markedLog) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	res, err := l.Log.Append(ctx, stream, expected, evs...)
	l.marks.note(evs, res.Position, err != nil)
	return res, err
}

// catchUpTo is the endpoint grains' Config.CatchUpTo: the furthest of the
// position from which this node serves p, the last append of p by its own
// grains, and the log's head when it opened it; the log's head now when
// one of them is not known.
func (s *Server) catchUpTo(ctx context.Context, p events.Partition) (events.Position, error) {
	since, served := s.parts.servedSince(p)
	own, known := s.appended.in(p)
	if !served || !known {
		return s.log.Head(ctx)
	}
	return latest(latest(since, own), s.openedAt), nil
}

// latest returns the later of two positions.
func latest(a, b events.Position) events.Position {
	if a.Less(b) {
		return b
	}
	return a
}
