package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// A tenant's own retention drops an event's streams only once every
// delivery its plan lists has ended, wherever its partition is served: a
// delivery still pending (its endpoint paused, or ordered and waiting
// behind its key) is attempted with its event's bytes. So before a pass
// drops the streams of the ended deliveries it found, it reads their
// events' plans and asks each of the other deliveries' partition owners
// whether they ended (HistoryEnds, one message per member and up to
// endsPerAsk deliveries). An event is dropped with its deliveries' streams
// only when every delivery of its plan was seen to end; a delivery not
// seen to end (pending, a parked key's head, not found, its owner not
// answering or catching up) keeps the event and every delivery stream of
// it for a later pass: a plan never stays in the log without the streams
// that end its deliveries, which a rebuild would take for pending and
// send again. Whichever member's pass first sees the whole plan ended
// drops the event stream (first) and its own deliveries' streams; the
// other members' passes then find the event gone and drop theirs.

// endsPerAsk bounds the deliveries one HistoryEnds asks a member about.
const endsPerAsk = 10_000

// planBudget bounds the planned deliveries one pass reads for one tenant:
// the events of a pass's ended deliveries are looked at in order until
// their plans reach it, and the others wait for the next sweep (see
// retentionSweep).
const planBudget = 10 * tenantRetentionBatch

// plansEnded reports, by event stream, whether every delivery of the plan
// of each event of ended (a tenant's ended deliveries this node serves)
// has ended: true for an event stream no longer in the log (a pass
// dropped it once its whole plan had ended). An event missing from the
// answer was not looked at (planBudget). The members in silent are not
// asked (their deliveries are not seen to end); those that do not answer
// are added to it.
func (s *Server) plansEnded(ctx context.Context, tenantID string, ended []history.Delivery, silent map[string]bool) (map[string]bool, error) {
	known := make(map[string]bool, len(ended)) // seen ended here
	for _, d := range ended {
		known[d.ID] = true
	}
	done := map[string]bool{}
	eventOf := map[string]string{}    // a delivery asked about -> its event stream
	unsure := map[string]int{}        // event stream -> its deliveries not yet seen to end
	byMember := map[string][]string{} // member -> the deliveries to ask it about
	var at events.Position            // the newest plan record read
	read := 0
	for _, d := range ended {
		es := events.EventStream(d.TenantID, d.EventID)
		if _, ok := done[es]; ok {
			continue
		}
		if read >= planBudget {
			break
		}
		plan, pos, err := s.readPlan(ctx, es)
		if errors.Is(err, events.ErrStreamNotFound) {
			done[es] = true
			continue
		}
		if err != nil {
			return nil, err
		}
		read += len(plan)
		if at.Less(pos) {
			at = pos
		}
		done[es] = true
		for _, p := range plan {
			id := p.GetDeliveryId()
			if known[id] || eventOf[id] != "" {
				continue
			}
			owner := s.node.PartitionOwner(events.PartitionOf(p.GetEndpointId()))
			if owner == "" || silent[owner] {
				done[es] = false // not seen to end: no member serves it now, or it did not answer
				continue
			}
			eventOf[id] = es
			unsure[es]++
			byMember[owner] = append(byMember[owner], id)
		}
	}
	for id := range s.endedOn(ctx, tenantID, byMember, at, silent) {
		unsure[eventOf[id]]--
	}
	for es, n := range unsure {
		if n > 0 {
			done[es] = false
		}
	}
	return done, nil
}

// planPage is how many records of an event stream one read returns: its
// plan's chunks (a few thousand deliveries each).
const planPage = 64

// readPlan returns the deliveries an event's plan lists (its
// DeliveriesPlanned chunks, repairs included), and the position of the
// last of them; [events.ErrStreamNotFound] when the stream is not in the
// log. The EventPublished, with the payload, is not read.
func (s *Server) readPlan(ctx context.Context, stream string) ([]*hooklinev1.PlannedDelivery, events.Position, error) {
	var plan []*hooklinev1.PlannedDelivery
	var at events.Position
	for from := events.Revision(1); ; {
		recs, err := s.log.ReadStream(ctx, stream, events.Forwards, from, planPage)
		if err != nil {
			return nil, at, fmt.Errorf("read the plan of %s: %w", stream, err)
		}
		for i := range recs {
			msg, err := events.Decode(&recs[i])
			if err != nil {
				return nil, at, err
			}
			if m, ok := msg.(*hooklinev1.DeliveriesPlanned); ok {
				plan = append(plan, m.GetDeliveries()...)
				at = recs[i].Position
			}
		}
		if len(recs) < planPage {
			return plan, at, nil
		}
		from = recs[len(recs)-1].Revision + 1
	}
}

// endedOn asks each member of byMember which of its deliveries ended
// (this node answers its own directly), and returns those that did. A
// member that does not answer is logged and added to silent: its
// deliveries were not seen to end, so their events are kept.
func (s *Server) endedOn(ctx context.Context, tenantID string, byMember map[string][]string, at events.Position, silent map[string]bool) map[string]bool {
	out := map[string]bool{}
	var mu sync.Mutex // guards out and silent
	var wg sync.WaitGroup
	self := s.node.Address()
	for member, ids := range byMember {
		for chunk := range slices.Chunk(ids, endsPerAsk) {
			req := &internalv1.HistoryEnds{TenantId: tenantID, DeliveryIds: chunk, AtLeastCommit: at.Commit, AtLeastPrepare: at.Prepare}
			wg.Go(func() {
				var got *internalv1.HistoryEnded
				var err error
				if member == self {
					got, err = s.answerEnds(ctx, req)
				} else if got, err = ask[*internalv1.HistoryEnded](ctx, s.node, member, retentionService, req, 0); err == nil && got.GetError() != "" {
					err = errors.New(got.GetError())
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if !silent[member] {
						s.logger.Warn("tenant retention: a member did not say which deliveries ended; their events are kept",
							slog.String("member", member), slog.String("tenant_id", tenantID), slog.Any("error", err))
					}
					silent[member] = true
					return
				}
				for _, id := range got.GetEnded() {
					out[id] = true
				}
			})
		}
	}
	wg.Wait()
	return out
}

// serveEnds answers another member's HistoryEnds.
func (s *Server) serveEnds(ctx context.Context, msg proto.Message) proto.Message {
	m, ok := msg.(*internalv1.HistoryEnds)
	if !ok {
		return nil
	}
	got, err := s.answerEnds(ctx, m)
	if err != nil {
		return &internalv1.HistoryEnded{Error: err.Error()}
	}
	return got
}

// answerEnds returns which of the deliveries asked ended, once this node's
// projections have applied the log up to the position asked: those its
// history holds as succeeded or failed, in a partition it serves (not one
// it stands by for, nor one catching up), that are not their key's parked
// head (a replay of which sends the event again).
func (s *Server) answerEnds(ctx context.Context, m *internalv1.HistoryEnds) (*internalv1.HistoryEnded, error) {
	if pos := (events.Position{Commit: m.GetAtLeastCommit(), Prepare: m.GetAtLeastPrepare()}); !pos.IsStart() {
		wctx, cancel := context.WithTimeout(ctx, s.node.RequestTimeout())
		err := s.runner.WaitFor(wctx, pos)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("wait for %s: %w", pos, err)
		}
	}
	serving := s.runner.Serving() // before the reads
	out := &internalv1.HistoryEnded{}
	for _, id := range m.GetDeliveryIds() {
		d, ok, err := s.history.Get(m.GetTenantId(), id)
		if err != nil {
			return nil, err
		}
		if !ok || !serving.Has(events.PartitionOf(d.EndpointID)) || (d.Status != history.Succeeded && d.Status != history.Failed) {
			continue
		}
		parked, err := s.parkedHead(d)
		if err != nil {
			return nil, err
		}
		if !parked {
			out.Ended = append(out.Ended, id)
		}
	}
	return out, nil
}
