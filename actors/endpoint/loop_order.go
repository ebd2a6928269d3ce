package endpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Ordered deliveries' sequences. The due index hands the grain each
// ordering key's head (projections/due/order.go), and the grain numbers
// it when it first sends it: one more than the last sequence the key was
// ever sent with, which the index counts by the key's token
// (Sequences.LastSent). A delivery sent before keeps its sequence for its
// retries and replays (its stream says it); a replay of a delivery that
// never had its turn carries its key and no sequence. Every attempt with
// a sequence records it with the key's token, and the grain writes the
// counts the index has not seen checkpointed to the endpoint's ordering
// stream, which never expires (checkpointOrder): the counts survive the
// attempts that retention drops (ADR 0064).

// Sequences counts the sequences of the endpoint's ordering keys;
// *due.Due satisfies it.
type Sequences interface {
	LastSent(tenantID, endpointID, key string, token []byte, tokenKey string) (int64, error)
	Unchecked(endpointID string, limit int) (due.Checkpoint, error)
	CheckpointDue(endpointID string, now time.Time, all bool) bool
}

// ordering is a delivery's ordering key and sequence, as its streams and
// the due index tell them.
type ordering struct {
	key string
	// sent is the sequence its attempts (or a replay) carried: 0 when it
	// was never sent with one.
	sent int64
	// seq is the sequence its next attempt carries, and token and
	// tokenKey its key's token (seal.Payloads.Token) when seq is set.
	seq      int64
	token    []byte
	tokenKey string
}

// sentWith notes an attempt's (or a replay's) key and sequence.
func (o *ordering) sentWith(key string, seq int64) {
	if key != "" {
		o.key = key
	}
	if seq > 0 {
		o.sent = seq
	}
}

// number finds the sequence of a delivery's next attempt, once its
// stream is read into o: the one it was sent with; or, for its key's head
// (it is ordered and due) never sent yet, one more than the key's last.
func (rd reader) number(ctx context.Context, it due.Item, o *ordering) error {
	if o.key == "" {
		o.key = it.OrderingKey
	}
	if o.key == "" {
		return nil
	}
	o.seq = o.sent
	if o.seq == 0 && !(it.Ordered() && !it.Waiting) {
		return nil // not its turn: sent with its key only
	}
	if o.seq == 0 && it.Sequence > 0 && len(it.Token) > 0 && !rd.payloads.Erased(it.TenantID, it.TokenKey) {
		o.seq, o.token, o.tokenKey = it.Sequence, it.Token, it.TokenKey // numbered by the pull
		return nil
	}
	token, tokenKey, err := rd.payloads.Token(ctx, it.TenantID, it.EndpointID, o.key)
	if err != nil {
		return fmt.Errorf("token of the ordering key of %s: %w", it.DeliveryID, err)
	}
	o.token, o.tokenKey = token, tokenKey
	if o.seq > 0 {
		return nil
	}
	if rd.seqs == nil {
		return errors.New("endpoint: no sequence counter for an ordered delivery; set Config.Sequences")
	}
	last, err := rd.seqs.LastSent(it.TenantID, it.EndpointID, o.key, token, tokenKey)
	if err != nil {
		return fmt.Errorf("last sequence of the ordering key of %s: %w", it.DeliveryID, err)
	}
	o.seq = last + 1
	return nil
}

// numbered takes the sequence and token a new head came with from the due
// index (due.Due.Pull numbers the heads it returns), unless the token's
// data key was erased since: the head is then sent without a read.
func (l *loop) numbered(f *flight) bool {
	it := &f.item
	if !it.Ordered() || it.Waiting || it.Sequence <= 0 || len(it.Token) == 0 || l.cfg.Payloads.Erased(it.TenantID, it.TokenKey) {
		return false
	}
	f.d.ord = ordering{key: it.OrderingKey, seq: it.Sequence, token: it.Token, tokenKey: it.TokenKey}
	return true
}

// ordered sets the ordering the read found on the flight's item, which
// the request and the attempt's record carry.
func (f *flight) ordered() {
	if f.d.ord.key != "" {
		f.item.OrderingKey, f.item.Sequence = f.d.ord.key, f.d.ord.seq
	}
}

// orderingOf fills an attempt's ordering fields: the flight's key, and its
// sequence with its key's token, unless the attempt sent nothing (unsent:
// the sequence it carries, if any, is in its earlier attempts).
func (f *flight) orderingOf(a *hooklinev1.Attempt) {
	a.OrderingKey = f.item.OrderingKey
	if !f.unsent && f.item.Sequence > 0 && f.item.Sequence == f.d.ord.seq && len(f.d.ord.token) > 0 {
		a.Sequence, a.OrderingToken, a.OrderingTokenKey = f.item.Sequence, f.d.ord.token, f.d.ord.tokenKey
	}
}

// maxCheckpointCounts bounds the counts one OrderingCheckpointed holds: a
// few tens of kilobytes.
const maxCheckpointCounts = 1000

// checkpointEvery bounds how often the loop asks the index whether a
// checkpoint is due.
const checkpointEvery = time.Second

// checkpointOrder appends the endpoint's unchecked counts to its ordering
// stream when the index says one has waited long enough, or, with all,
// when it has any; one append at a time, and none before the index has
// applied the last. A deleted endpoint has none to keep.
func (l *loop) checkpointOrder(ctx actor.Context, now time.Time, all bool) {
	c := &l.ckpt
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

// checkpointState is where the loop stands with its ordering stream.
type checkpointState struct {
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

// onCheckpointed notes a checkpoint's append. A wrong revision means
// another activation writes the stream: the grain stops, as for a
// delivery stream.
func (l *loop) onCheckpointed(ctx actor.Context, m *checkpointed) {
	c := &l.ckpt
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

// checkpointBeforeRest starts a checkpoint of every unchecked count of a
// paused or disabled endpoint, which no wake activates (the node holds
// its wakes back), and reports whether it did: the grain stays until it
// is applied.
func (l *loop) checkpointBeforeRest(ctx actor.Context) bool {
	now := l.cfg.Now()
	if !l.paused() || l.cfg.Sequences == nil || !l.cfg.Sequences.CheckpointDue(l.id, now, true) {
		return false
	}
	l.checkpointOrder(ctx, now, true)
	return true
}
