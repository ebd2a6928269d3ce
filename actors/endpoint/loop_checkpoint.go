package endpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// maxCheckpointCounts bounds the counts one OrderingCheckpointed holds: a
// few tens of kilobytes.
const maxCheckpointCounts = 1000

// checkpointEvery bounds how often the loop asks the index whether a
// checkpoint is due.
const checkpointEvery = time.Second

// write appends the endpoint's unchecked counts to its ordering stream
// when the index says one has waited long enough, or, with all, when it
// has any; one append at a time, and none before the index has applied
// the last. A deleted endpoint has none to keep.
func (c *checkpointer) write(ctx actor.Context, now time.Time, all bool) {
	l := c.l
	seqs := l.cfg.Sequences
	if seqs == nil || c.writing || l.handover.retiring || !l.state.Live() || (!all && now.Before(c.next)) {
		return
	}
	c.next = now.Add(checkpointEvery)
	if !c.applied.IsStart() && l.cfg.Projections.Applied().Less(c.applied) {
		return // the last one is not applied yet: its counts look unchecked
	}
	if !seqs.CheckpointDue(l.id, now, all) {
		return
	}
	c.writing = true
	log, id, stream, rev, known := l.cfg.Log, l.id, events.OrderingStream(l.id), c.rev, c.known
	tenantID, part := l.state.TenantID, l.partition()
	l.async(ctx, l.cfg.IOTimeout, func(ctx context.Context) any {
		cp, err := seqs.Unchecked(id, maxCheckpointCounts)
		if err != nil || cp.Empty() {
			return &checkpointed{err: err}
		}
		if !known {
			if rev, known, err = lastRevision(ctx, log, stream); err != nil {
				return &checkpointed{err: err}
			}
		}
		m := &hooklinev1.OrderingCheckpointed{TenantId: tenantID, EndpointId: id, Floor: cp.Floor, At: timestamppb.New(now)}
		for _, n := range cp.Counts {
			m.Counts = append(m.Counts, &hooklinev1.OrderingCount{Token: n.Token, TokenKey: n.TokenKey, Sequence: n.Sequence})
		}
		next := events.Revision(0)
		if known {
			next = rev + 1
		}
		ev, err := encodeDelivery(l.incarnation, stream, part, next, m)
		if err != nil {
			return &checkpointed{err: err}
		}
		res, err := log.Append(ctx, stream, events.ExpectAfter(rev, known), ev)
		return &checkpointed{res: res, err: err, appended: true}
	})
}

// checkpointer writes the counts of the endpoint's ordering keys to its
// ordering stream, and knows where the loop stands with that stream.
// Owned by the actor, like the loop.
type checkpointer struct {
	l       *loop
	writing bool
	next    time.Time // when to ask the index again
	// rev and known: the stream's last revision, once read or appended.
	rev   events.Revision
	known bool
	// applied is the position of the last checkpoint appended, which the
	// index must apply before the next.
	applied events.Position
}

// checkpointed is the result of a checkpoint's append.
type checkpointed struct {
	res      events.AppendResult
	appended bool
	err      error
}

// onWritten notes a checkpoint's append. A wrong revision means another
// activation writes the stream: the grain stops, as for a delivery stream.
func (c *checkpointer) onWritten(ctx actor.Context, m *checkpointed) {
	l := c.l
	c.writing = false
	switch {
	case m.err == nil && m.appended:
		c.rev, c.known, c.applied = m.res.Revision, true, m.res.Position
	case errors.Is(m.err, events.ErrWrongRevision):
		l.log.Warn("endpoint grain lost ownership of its ordering stream; stopping", "error", m.err)
		l.cfg.Quarantine.Lost(l.id, l.cfg.Now())
		l.core.Stop(ctx, internalv1.GrainError_CODE_ABORTED, "another activation of the endpoint grain owns its deliveries now; retry")
		return
	case m.err != nil:
		c.known = false // read it again: the append may have landed
		l.log.Warn("endpoint grain cannot checkpoint its ordering keys; retrying", "error", m.err)
	}
	l.pump(ctx)
}

// lastRevision reads the revision of a stream's last event.
func lastRevision(ctx context.Context, log events.Log, stream string) (events.Revision, bool, error) {
	recs, err := log.ReadStream(ctx, stream, events.Backwards, events.End, 1)
	switch {
	case errors.Is(err, events.ErrStreamNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("read %s: %w", stream, err)
	case len(recs) == 0:
		return 0, false, nil
	}
	return recs[0].Revision, true, nil
}

// beforeRest starts a checkpoint of every unchecked count of a paused or
// disabled endpoint, which no wake activates (the node holds its wakes
// back), and reports whether it did: the grain stays until it is applied.
func (c *checkpointer) beforeRest(ctx actor.Context) bool {
	l := c.l
	now := l.cfg.Now()
	if !l.paused() || l.cfg.Sequences == nil || !l.cfg.Sequences.CheckpointDue(l.id, now, true) {
		return false
	}
	c.write(ctx, now, true)
	return true
}
