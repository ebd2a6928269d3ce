package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/pause"
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

// Search answers a search from the members' parts. Each partition is
// asked of one member: its owner, or, when its owner is not a member now or
// did not answer for it, the next member in its ranking that holds it (a
// standby, which applies the same records), so that searches go on through
// a change of members. Each member is asked for its share of the page by
// the partitions asked of it, and a margin (memberLimit), not for a whole
// page: a part that stopped too early for a full page is continued after
// its frontier (history.Behind) for what it may still add (history.Room),
// for the partitions of its first answer. So a search reads about a page
// and a fifth over the cluster, not one page per member, and its pages are
// as full as a single store's. When some partitions are held by no member
// that answered, or a continued part's partitions moved meanwhile, it
// fails with [history.ErrIncomplete] rather than answer a page that
// another node would answer differently.
func (h *histories) Search(ctx context.Context, q history.Query) (history.Page, error) {
	after, err := history.CursorKey(q)
	if err != nil {
		return history.Page{}, err
	}
	members := h.members()
	limit := history.LimitOf(q)
	parts, err := h.firstParts(ctx, q, members, after, limit)
	if err != nil {
		return history.Page{}, err
	}
	for round := 1; ; round++ {
		have := make([]history.Partial, len(parts))
		for i, pt := range parts {
			have[i] = pt.partial
		}
		behind := history.Behind(q, have)
		if len(behind) == 0 || round == maxSearchRounds {
			return history.Merge(q, have), nil // a short page at worst: its cursor goes on
		}
		targets := make([]scanTarget, len(behind))
		for j, i := range behind {
			pt := parts[i]
			r := scanRequest(q, history.Room(q, have, i), pt.partial.Frontier)
			r.Partitions = pt.set.Words()
			targets[j] = scanTarget{addr: members[pt.member], req: r}
		}
		for j, a := range h.scan(ctx, targets) {
			pt := parts[behind[j]]
			if a.err != nil {
				return history.Page{}, fmt.Errorf("%w: member %s did not answer the rest of its part; retry", history.ErrIncomplete, members[pt.member])
			}
			if got := events.PartitionSetOfWords(a.v.GetPartitions()); got != pt.set {
				return history.Page{}, fmt.Errorf("%w: partitions %s moved away from member %s during the search; retry in a few seconds",
					history.ErrIncomplete, pt.set.Minus(got), members[pt.member])
			}
			pt.partial.Continue(partialOf(a.v))
		}
	}
}

// searchPart is one member's part of a search: the partitions it answered
// for and what it found.
type searchPart struct {
	member  int
	set     events.PartitionSet
	partial history.Partial
}

// firstParts asks every partition of one member, in at most three passes:
// first each partition's owner (or first ranked member), then, for the
// partitions nobody answered for, the next candidates in their ranking.
// Partitions still missing are asked again once, after missingPause: a
// partition moving between members (its old holder has let it go, its
// table not yet read by this node) is held again within moments.
func (h *histories) firstParts(ctx context.Context, q history.Query, members []string, after []byte, limit int) ([]*searchPart, error) {
	var parts []*searchPart
	missing := allPartitions()
	for pass := 0; !missing.IsEmpty(); pass++ {
		if pass == searchPasses {
			if pause.For(ctx, missingPause) != nil {
				break
			}
		}
		if pass == 2*searchPasses {
			break
		}
		var targets []scanTarget
		var of []int // member index of each target
		for i, set := range h.assign(members, missing, pass%searchPasses) {
			if set.IsEmpty() {
				continue // an empty set would ask for every partition it holds
			}
			r := scanRequest(q, memberLimit(limit, set.Len(), events.Partitions), after)
			r.Partitions = set.Words()
			targets, of = append(targets, scanTarget{addr: members[i], req: r}), append(of, i)
		}
		for j, a := range h.scan(ctx, targets) {
			if a.err != nil {
				if errors.Is(a.err, history.ErrBadQuery) || errors.Is(a.err, history.ErrBadCursor) {
					return nil, a.err
				}
				h.logger.Warn("history search: a member did not answer", slog.String("member", members[of[j]]), slog.Any("error", a.err))
				continue
			}
			got := events.PartitionSetOfWords(a.v.GetPartitions())
			parts = append(parts, &searchPart{member: of[j], set: got, partial: partialOf(a.v)})
			missing = missing.Minus(got)
		}
	}
	if !missing.IsEmpty() {
		return nil, fmt.Errorf("%w: %d of %d partitions (%s) are held by no member that answered; retry in a few seconds",
			history.ErrIncomplete, missing.Len(), events.Partitions, missing)
	}
	return parts, nil
}

// searchPasses bounds the members asked for one partition in one round of
// a search's first parts; missingPause is the pause before the second.
const (
	searchPasses = 3
	missingPause = 250 * time.Millisecond
)

// assign gives each partition of missing to one member, by member index:
// in pass 0 its owner if a member, else the first member in its ranking;
// in pass k the k-th candidate after that.
func (h *histories) assign(members []string, missing events.PartitionSet, pass int) []events.PartitionSet {
	index := map[string]int{}
	for i, m := range members {
		index[m] = i
	}
	out := make([]events.PartitionSet, len(members))
	ranking := h.node.Ranking()
	missing.Each(func(p events.Partition) {
		candidates := make([]string, 0, len(members)+1)
		if o := h.node.PartitionOwner(p); o != "" {
			candidates = append(candidates, o)
		}
		for _, m := range ranking.Order(p) {
			if !slices.Contains(candidates, m) {
				candidates = append(candidates, m)
			}
		}
		candidates = slices.DeleteFunc(candidates, func(m string) bool { _, ok := index[m]; return !ok })
		if pass < len(candidates) {
			out[index[candidates[pass]]].Add(p)
		}
	})
	return out
}

// scanRequest is a search's request of one part.
func scanRequest(q history.Query, limit int, after []byte) *internalv1.HistoryScan {
	return &internalv1.HistoryScan{
		TenantId: q.TenantID, EndpointId: q.EndpointID, Status: int32(q.Status), EventType: q.EventType,
		Since: stamp(q.Since), Until: stamp(q.Until), Limit: int32(limit), After: after,
	}
}

// maxSearchRounds bounds the rounds of one search: the first, and those
// that continue the parts that stopped early.
const maxSearchRounds = 4

// memberLimit is how many entries a search asks of a member for k of the
// total partitions, at first: its share of the page, if entries are spread
// evenly over partitions, and three standard deviations of that share
// (binomial) and a few more, so that a member seldom runs short (a part
// that does is continued for what it may still add). For a page of 1,000
// over three members, 387 each (a page and a sixth in all).
func memberLimit(limit, k, total int) int {
	if total <= 0 || k >= total {
		return limit
	}
	q := float64(k) / float64(total)
	share := float64(limit) * q
	return min(limit, int(math.Ceil(share+3*math.Sqrt(share*(1-q))))+8)
}

// scanTarget is one part's request to one member.
type scanTarget struct {
	addr string
	req  *internalv1.HistoryScan
}

// scan sends each target's request to its member (this node's read here),
// at once, and returns the answers in the targets' order.
func (h *histories) scan(ctx context.Context, targets []scanTarget) []reply[*internalv1.HistoryScanned] {
	addrs := make([]string, len(targets))
	for i, t := range targets {
		addrs[i] = t.addr
	}
	return askEach(ctx, h, addrs, func(i int) proto.Message { return targets[i].req }, func(i int) (*internalv1.HistoryScanned, error) {
		return h.scanHere(targets[i].req)
	})
}

// Get returns a delivery with its attempts from the member that serves its
// partition, once that member has applied the log up to atLeast.
func (h *histories) Get(ctx context.Context, tenantID, deliveryID string, atLeast events.Position) (history.Delivery, []history.Attempt, bool, error) {
	req := &internalv1.HistoryGet{TenantId: tenantID, DeliveryId: deliveryID, AtLeastCommit: atLeast.Commit, AtLeastPrepare: atLeast.Prepare}
	// Most reads concern this node's own partitions (or those it stands by
	// for), or at least find out here which partition the delivery is in.
	var covered events.PartitionSet
	if got, err := h.answerGet(ctx, req); err == nil {
		if got.GetFound() {
			d, attempts := gotOf(got)
			return d, attempts, true, nil
		}
		covered = events.PartitionSetOfWords(got.GetLive())
	}
	members := h.members()
	answers := askEach[*internalv1.HistoryGot](ctx, h, members, func(int) proto.Message { return req }, nil)
	for i, a := range answers {
		switch {
		case a.v.GetFound():
			d, attempts := gotOf(a.v)
			return d, attempts, true, nil
		case a.err != nil:
			h.logger.Warn("history read: a member did not answer", slog.String("member", members[i]), slog.Any("error", a.err))
		case a.v != nil:
			covered = covered.Union(events.PartitionSetOfWords(a.v.GetLive()))
		}
	}
	// Not found: in none of the partitions some member has live. If some
	// partition is live nowhere (a member down or catching up, or one that
	// did not answer), the delivery may be there: UNAVAILABLE, not
	// NOT_FOUND.
	if missing := allPartitions().Minus(covered); !missing.IsEmpty() {
		return history.Delivery{}, nil, false, fmt.Errorf("%w: %d partitions are live on no member that answered; retry", history.ErrIncomplete, missing.Len())
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
	live := h.served() // before the read: not found here means in none of these
	d, ok, err := h.local.Get(req.GetTenantId(), req.GetDeliveryId())
	if err != nil {
		return nil, err
	}
	if standby := live.Minus(h.runner.Serving()); (!ok || standby.Has(events.PartitionOf(d.EndpointID))) && h.runner.Fresh(standby) {
		// A standby applies its records a moment late (projections'
		// StandbyDelay): read again once they are applied.
		if d, ok, err = h.local.Get(req.GetTenantId(), req.GetDeliveryId()); err != nil {
			return nil, err
		}
	}
	if !ok || !live.Has(events.PartitionOf(d.EndpointID)) {
		return &internalv1.HistoryGot{Live: live.Words()}, nil
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
	h.runner.Fresh(parts) // those it stands by for, applied a moment late
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

// askEach sends reqOf(i) to the history service of every member addrs[i]
// (none when reqOf returns nil), at once, and returns their answers by
// index; here answers this node's own, or, when nil, this node is not
// asked (its slot left empty).
func askEach[T interface {
	GetError() string
	proto.Message
}](ctx context.Context, h *histories, addrs []string, reqOf func(i int) proto.Message, here func(i int) (T, error)) []reply[T] {
	out := make([]reply[T], len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		req := reqOf(i)
		if req == nil || (addr == h.node.Address() && here == nil) {
			continue
		}
		wg.Go(func() {
			var v T
			var err error
			if addr == h.node.Address() {
				v, err = here(i)
			} else {
				v, err = ask[T](ctx, h.node, addr, historyService, req, h.timeout)
			}
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
