package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// histories is the delivery history of the whole cluster, as the control
// API sees it: each node keeps the history of the partitions it owns, and
// a search or read asks every member (itself directly, the others through
// their history actors) and puts the answers together. A cursor made on
// one node is valid on every other: pages are merged by index key
// (history.Merge), not by node. It is safe for concurrent use.
type histories struct {
	node    *cluster.Node
	local   *history.History
	runner  *projections.Runner
	kind    string        // the partitioned kind: its members hold history
	timeout time.Duration // per member
	logger  *slog.Logger
}

// served is the set of partitions this node answers for: those live here.
func (h *histories) served() events.PartitionSet {
	s := h.runner.Live()
	s.Remove(events.NoPartition)
	return s
}

// Search answers a search from every member's part. Each member is asked
// for about its share of the page (memberLimit), not for a whole page:
// the parts that stopped too early for a full page are continued after
// their frontiers (history.Behind), for the partitions of their first
// answer, in a few more rounds at most. So a search reads about one page
// and a half over the cluster, not one page per member, and its pages are
// as full as a single store's. When some partitions are served by no
// member that answered (a member down, or catching up after partitions
// moved), or a continued part's partitions moved meanwhile, it fails with
// [history.ErrIncomplete] rather than answer a page that another node
// would answer differently.
func (h *histories) Search(ctx context.Context, q history.Query) (history.Page, error) {
	after, err := history.CursorKey(q)
	if err != nil {
		return history.Page{}, err
	}
	members := h.members()
	limit := history.LimitOf(q)
	per := memberLimit(limit, len(members))
	parts := make([]history.Partial, len(members))
	sets := make([]events.PartitionSet, len(members)) // what each answered for
	answered := make([]int, 0, len(members))          // members with a part
	ask := make([]int, len(members))
	for i := range ask {
		ask[i] = i
	}
	for round := 0; ; round++ {
		reqs := make([]*internalv1.HistoryScan, len(members))
		for _, i := range ask {
			r := &internalv1.HistoryScan{
				TenantId: q.TenantID, EndpointId: q.EndpointID, Status: int32(q.Status), EventType: q.EventType,
				Since: stamp(q.Since), Until: stamp(q.Until), Limit: int32(per), After: after,
			}
			if round > 0 {
				r.After, r.Partitions = parts[i].Frontier, sets[i].Words()
			}
			reqs[i] = r
		}
		answers := h.scan(ctx, members, reqs)
		for _, i := range ask {
			a := answers[i]
			if a.err != nil {
				if errors.Is(a.err, history.ErrBadQuery) || errors.Is(a.err, history.ErrBadCursor) {
					return history.Page{}, a.err
				}
				h.logger.Warn("history search: a member did not answer", slog.String("member", members[i]), slog.Any("error", a.err))
				if round > 0 {
					return history.Page{}, fmt.Errorf("%w: member %s did not answer the rest of its part; retry", history.ErrIncomplete, members[i])
				}
				continue
			}
			got := events.PartitionSetOfWords(a.v.GetPartitions())
			if round == 0 {
				parts[i], sets[i] = partialOf(a.v), got
				answered = append(answered, i)
				continue
			}
			if got != sets[i] {
				return history.Page{}, fmt.Errorf("%w: partitions %s moved away from member %s during the search; retry in a few seconds",
					history.ErrIncomplete, sets[i].Minus(got), members[i])
			}
			parts[i].Continue(partialOf(a.v))
		}
		if round == 0 {
			var covered events.PartitionSet
			for _, i := range answered {
				covered = covered.Union(sets[i])
			}
			if missing := allPartitions().Minus(covered); !missing.IsEmpty() {
				return history.Page{}, fmt.Errorf("%w: %d of %d partitions (%s) have no node serving them now; retry in a few seconds",
					history.ErrIncomplete, missing.Len(), events.Partitions, missing)
			}
		}
		have := make([]history.Partial, len(answered))
		for j, i := range answered {
			have[j] = parts[i]
		}
		behind := history.Behind(q, have)
		if len(behind) == 0 || round == maxSearchRounds-1 {
			return history.Merge(q, have), nil // a short page at worst: its cursor goes on
		}
		ask = ask[:0]
		for _, j := range behind {
			ask = append(ask, answered[j])
		}
		per = min(limit, 2*per)
	}
}

// maxSearchRounds bounds the rounds of one search: the first, and those
// that continue the parts that stopped early.
const maxSearchRounds = 4

// memberLimit is how many entries a search asks each of n members for, at
// first: its share of the page, and half as much again for partitions
// unevenly spread (a part that runs short is continued).
func memberLimit(limit, n int) int {
	if n <= 1 {
		return limit
	}
	share := (limit + n - 1) / n
	return min(limit, share+share/2+8)
}

// scan asks the members with a request in reqs (by member index, nil for
// none) for their parts, this node's own read here, and returns the
// answers by member index.
func (h *histories) scan(ctx context.Context, members []string, reqs []*internalv1.HistoryScan) []reply[*internalv1.HistoryScanned] {
	self := -1
	for i, addr := range members {
		if addr == h.node.Address() && reqs[i] != nil {
			self = i
		}
	}
	own := make(chan reply[*internalv1.HistoryScanned], 1)
	if self >= 0 {
		go func() {
			v, err := h.scanHere(reqs[self])
			own <- reply[*internalv1.HistoryScanned]{v: v, err: err}
		}()
	}
	answers := askOthers[*internalv1.HistoryScanned](ctx, h, members, func(i int) proto.Message {
		if reqs[i] == nil {
			return nil
		}
		return reqs[i]
	})
	if self >= 0 {
		answers[self] = <-own
	}
	return answers
}

// Get returns a delivery with its attempts from the member that serves its
// partition, once that member has applied the log up to atLeast.
func (h *histories) Get(ctx context.Context, tenantID, deliveryID string, atLeast events.Position) (history.Delivery, []history.Attempt, bool, error) {
	req := &internalv1.HistoryGet{TenantId: tenantID, DeliveryId: deliveryID, AtLeastCommit: atLeast.Commit, AtLeastPrepare: atLeast.Prepare}
	// Most reads concern this node's own partitions, or at least find out
	// here which partition the delivery is in.
	if got, err := h.answerGet(ctx, req); err == nil && got.GetFound() {
		d, attempts := gotOf(got)
		return d, attempts, true, nil
	}
	members := h.members()
	answers := askOthers[*internalv1.HistoryGot](ctx, h, members, func(int) proto.Message { return req })
	failed := 0
	for i, a := range answers {
		switch {
		case a.v.GetFound():
			d, attempts := gotOf(a.v)
			return d, attempts, true, nil
		case a.err != nil:
			failed++
			h.logger.Warn("history read: a member did not answer", slog.String("member", members[i]), slog.Any("error", a.err))
		}
	}
	if failed > 0 {
		return history.Delivery{}, nil, false, fmt.Errorf("%w: %d member(s) did not answer; retry", history.ErrIncomplete, failed)
	}
	return history.Delivery{}, nil, false, nil
}

// answerGet reads a delivery here, if its partition is served here.
func (h *histories) answerGet(ctx context.Context, req *internalv1.HistoryGet) (*internalv1.HistoryGot, error) {
	if pos := (events.Position{Commit: req.GetAtLeastCommit(), Prepare: req.GetAtLeastPrepare()}); !pos.IsStart() {
		wctx, cancel := context.WithTimeout(ctx, h.timeout)
		err := h.runner.WaitFor(wctx, pos)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	d, ok, err := h.local.Get(req.GetTenantId(), req.GetDeliveryId())
	if err != nil {
		return nil, err
	}
	if !ok || !h.runner.Live().Has(events.PartitionOf(d.EndpointID)) {
		return &internalv1.HistoryGot{}, nil
	}
	attempts, err := h.local.Attempts(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	got := &internalv1.HistoryGot{Found: true, Delivery: d.Record()}
	for _, a := range attempts {
		got.Attempts = append(got.Attempts, &internalv1.HistoryAttempt{
			Succeeded: a.Succeeded, Attempt: a.Attempt, Retryable: a.Retryable, NextAttemptAt: stamp(a.NextAttemptAt),
		})
	}
	return got, nil
}

// answerScan is this node's part of another member's search, for the
// partitions it serves (those of them asked for, when the search
// continues a part).
func (h *histories) answerScan(m *internalv1.HistoryScan) *internalv1.HistoryScanned {
	v, err := h.scanHere(m)
	if err != nil {
		return &internalv1.HistoryScanned{Error: err.Error()}
	}
	return v
}

// scanHere is this node's part of a search; its errors keep their kind
// (history.ErrBadQuery, history.ErrBadCursor).
func (h *histories) scanHere(m *internalv1.HistoryScan) (*internalv1.HistoryScanned, error) {
	q := history.Query{
		TenantID: m.GetTenantId(), EndpointID: m.GetEndpointId(), Status: history.Status(m.GetStatus()), EventType: m.GetEventType(),
		Since: timeOf(m.GetSince()), Until: timeOf(m.GetUntil()), Limit: int(m.GetLimit()),
	}
	parts := h.served()
	if w := m.GetPartitions(); len(w) > 0 {
		parts = parts.Intersect(events.PartitionSetOfWords(w))
	}
	var after []byte
	if len(m.GetAfter()) > 0 {
		after = m.GetAfter()
	}
	p, err := h.local.Scan(q, after, &parts)
	if err != nil {
		return nil, err
	}
	return partialScanned(p, parts), nil
}

// partialScanned is a scan's part as a member sends it, for the partitions
// it served.
func partialScanned(p history.Partial, parts events.PartitionSet) *internalv1.HistoryScanned {
	out := &internalv1.HistoryScanned{Frontier: p.Frontier, Done: p.Done, Partitions: parts.Words()}
	for _, e := range p.Entries {
		out.Entries = append(out.Entries, &internalv1.HistoryScanned_Entry{Key: e.Key, Delivery: e.Delivery.Record()})
	}
	return out
}

// members returns the addresses of the members that hold history: those
// hosting the partitioned kind.
func (h *histories) members() []string { return h.node.Hosting(h.kind) }

// reply is one member's answer, or why there is none.
type reply[T any] struct {
	v   T
	err error
}

// askOthers sends reqOf(i) to the history actor of every member i but this
// node (none when reqOf returns nil), at once, and returns their answers by
// member index (the slots of this node and of those not asked left empty).
func askOthers[T interface {
	*internalv1.HistoryScanned | *internalv1.HistoryGot
	GetError() string
	proto.Message
}](ctx context.Context, h *histories, members []string, reqOf func(i int) proto.Message) []reply[T] {
	out := make([]reply[T], len(members))
	var wg sync.WaitGroup
	for i, addr := range members {
		req := reqOf(i)
		if addr == h.node.Address() || req == nil {
			continue
		}
		wg.Go(func() {
			v, err := ask[T](ctx, h.node, addr, historyService, req, h.timeout)
			switch {
			case err != nil:
				out[i].err = err
			case v.GetError() != "":
				out[i].err = fmt.Errorf("member %s: %s", addr, v.GetError())
			default:
				out[i].v = v
			}
		})
	}
	wg.Wait()
	return out
}

// serve answers the other members' HistoryScan and HistoryGet, each in a
// goroutine of its own: reads take milliseconds and must not queue behind
// each other.
func (h *histories) serve(ctx context.Context, msg proto.Message) proto.Message {
	switch m := msg.(type) {
	case *internalv1.HistoryScan:
		return h.answerScan(m)
	case *internalv1.HistoryGet:
		got, err := h.answerGet(ctx, m)
		if err != nil {
			got = &internalv1.HistoryGot{Error: err.Error()}
		}
		return got
	}
	return nil
}

func partialOf(r *internalv1.HistoryScanned) history.Partial {
	p := history.Partial{Done: r.GetDone()}
	if !p.Done {
		p.Frontier = r.GetFrontier()
	}
	for _, e := range r.GetEntries() {
		p.Entries = append(p.Entries, history.Entry{Key: e.GetKey(), Delivery: history.FromRecord(e.GetDelivery())})
	}
	return p
}

func gotOf(got *internalv1.HistoryGot) (history.Delivery, []history.Attempt) {
	d := history.FromRecord(got.GetDelivery())
	var attempts []history.Attempt
	for _, a := range got.GetAttempts() {
		attempts = append(attempts, history.Attempt{
			Succeeded: a.GetSucceeded(), Attempt: a.GetAttempt(), Retryable: a.GetRetryable(), NextAttemptAt: timeOf(a.GetNextAttemptAt()),
		})
	}
	return d, attempts
}

func allPartitions() events.PartitionSet {
	s := events.AllPartitions()
	s.Remove(events.NoPartition)
	return s
}

func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
