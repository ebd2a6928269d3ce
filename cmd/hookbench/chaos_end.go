package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The end of a chaos run: what held work back is lifted, the work
// drains, the node must have nothing pending left, reconcile must be
// clean, and the erased events are read back once more.

// finish lifts the outages and pauses, starts any node left down, waits
// for the deliveries that must arrive (at most --drain) and for nothing
// to be pending (at least 30 s more), reconciles and reads the erased
// events back.
func (c *chaosRun) finish(ctx context.Context) chaosEnd {
	var end chaosEnd
	c.mu.Lock()
	eps := slices.SortedFunc(maps.Values(c.eps), func(a, b *chaosEndpoint) int { return strings.Compare(a.name, b.name) })
	c.mu.Unlock()
	for _, m := range eps {
		c.b.recv.SetBehaviour(m.name, m.behaviour())
		err := c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
			_, err := cc.endpoints.ResumeEndpoint(ctx, &controlv1.ResumeEndpointRequest{TenantId: m.tenant.ID, EndpointId: m.id})
			return err
		})
		if err != nil && status.Code(err) != codes.FailedPrecondition {
			end.notes = append(end.notes, fmt.Sprintf("resume %s: %v", m.name, err))
		}
	}
	for i := range c.sys.count() {
		if !c.sys.isUp(i) {
			if err := c.sys.restart(ctx, i, nil); err != nil {
				end.notes = append(end.notes, fmt.Sprintf("start node %d at the end: %v", i+1, err))
			}
		}
	}
	began := time.Now()
	deadline := began.Add(c.b.cfg.Drain)
	for time.Now().Before(deadline) && len(checkLost(c.facts(end))) > 0 {
		if sleepCtx(ctx, time.Second) != nil {
			return end
		}
	}
	for {
		pending, err := c.pending(ctx)
		end.pending = pending
		if err != nil {
			end.notes = append(end.notes, fmt.Sprintf("pending deliveries: %v", err))
		}
		if len(pending) == 0 || time.Now().After(later(deadline, began.Add(30*time.Second))) || sleepCtx(ctx, time.Second) != nil {
			break
		}
	}
	end.drained = time.Since(began)
	end.reconcile = c.reconcile(ctx)
	c.probeAgain(ctx)
	return end
}

// pending lists the deliveries the node has pending, over every tenant.
func (c *chaosRun) pending(ctx context.Context) ([]string, error) {
	var out []string
	for _, t := range c.tenants {
		for cursor := ""; ; {
			var resp *controlv1.ListDeliveriesResponse
			err := c.rpc(ctx, func(ctx context.Context, cc *controlClients) (err error) {
				resp, err = cc.deliveries.ListDeliveries(ctx, &controlv1.ListDeliveriesRequest{TenantId: t.ID, Status: "pending", PageSize: 1000, Cursor: cursor})
				return err
			})
			if err != nil {
				return out, err
			}
			for _, d := range resp.GetDeliveries() {
				out = append(out, d.GetDeliveryId())
			}
			if cursor = resp.GetNextCursor(); cursor == "" {
				break
			}
		}
	}
	return out, nil
}

// reconcile runs reconcile and returns its discrepancies (one that says
// why when it did not run).
func (c *chaosRun) reconcile(ctx context.Context) []discrepancy {
	var rep *controlv1.ReconcileReport
	err := c.sys.call(ctx, func(ctx context.Context, api *API) (err error) {
		rep, err = api.Reconcile(ctx, &controlv1.ReconcileRequest{})
		return err
	})
	if err != nil {
		return []discrepancy{{kind: "reconcile_failed", detail: err.Error()}}
	}
	var out []discrepancy
	for _, d := range rep.GetDiscrepancies() {
		out = append(out, discrepancy{kind: d.GetKind(), tenant: d.GetTenantId(), event: d.GetEventId(), deliveries: d.GetDeliveryIds(), detail: d.GetDetail()})
	}
	if n := rep.GetDiscrepanciesTotal(); !rep.GetClean() && int(n) > len(out) {
		out = append(out, discrepancy{kind: "unlisted", detail: fmt.Sprintf("%d more discrepancies than the report lists (%s)", int(n)-len(out), strings.Join(rep.GetNotes(), "; "))})
	}
	return out
}

// chaosSummary is the chaos run's JSON line.
type chaosSummary struct {
	Scenario string            `json:"scenario"`
	Seed     int64             `json:"seed"`
	Duration string            `json:"duration"`
	Nodes    int               `json:"nodes"`
	Schedule string            `json:"schedule"`
	Pass     bool              `json:"pass"`
	Checks   map[string]int    `json:"checks"`
	Actions  map[chaosKind]int `json:"actions"`
	// Refused counts the actions the node answered with an error, by kind.
	Refused map[chaosKind]int `json:"refused,omitempty"`
	// Events and Deliveries were published and planned; Delivered reached
	// their endpoint; Erased, Permanent and Retained did not and need not
	// have (their tenant was erased, their receiver answered a permanent
	// 4xx, retention passed them).
	Events     int      `json:"events"`
	Deliveries int      `json:"deliveries"`
	Delivered  int      `json:"delivered"`
	Erased     int      `json:"erased"`
	Permanent  int      `json:"permanent"`
	Retained   int      `json:"retained"`
	Pushed     int      `json:"pushed"`
	Pulled     int      `json:"pulled"`
	Duplicates int      `json:"duplicates"`
	DrainS     float64  `json:"drain_s"`
	Replay     string   `json:"replay"`
	Notes      []string `json:"notes,omitempty"`
}

// summary counts the run's figures and checks.
func (f *chaosFacts) summary(s chaosSchedule, violations map[string][]chaosViolation) chaosSummary {
	out := chaosSummary{Scenario: "chaos", Seed: s.Seed, Duration: s.Duration.String(), Nodes: s.Nodes, Schedule: s.Digest(),
		Checks: map[string]int{}, Actions: map[chaosKind]int{}, Refused: map[chaosKind]int{}, Events: len(f.events),
		DrainS: round(f.end.drained.Seconds(), 1), Notes: f.end.notes,
		Replay: fmt.Sprintf("hookbench run chaos --seed %d --duration %v --nodes %d", s.Seed, s.Duration, s.Nodes)}
	for _, st := range f.steps {
		out.Actions[st.Action.Kind]++
		if st.Err != "" {
			out.Refused[st.Action.Kind]++
		}
	}
	f.each(func(e *chaosEvent, endpoint, id string) {
		out.Deliveries++
		ss := f.seenBy[id]
		switch {
		case delivered(e, endpoint, ss):
			out.Delivered++
		case f.erasable(e):
			out.Erased++
		case slices.ContainsFunc(ss, chaosSeen.permanent):
			out.Permanent++
		case f.retained(e, id):
			out.Retained++
		}
	})
	oks := map[string]int{}
	for _, s := range f.seen {
		if s.Host == pullHost {
			out.Pulled++
		} else {
			out.Pushed++
		}
		if s.ok() {
			if oks[s.Delivery]++; oks[s.Delivery] > 1 {
				out.Duplicates++
			}
		}
	}
	out.Pass = true
	for _, ch := range chaosChecks {
		out.Checks[ch.name] = len(violations[ch.name])
		out.Pass = out.Pass && len(violations[ch.name]) == 0
	}
	return out
}

// errChaos reports the checks a chaos run broke.
func errChaos(sum chaosSummary) error {
	if sum.Pass {
		return nil
	}
	var broken []string
	for _, ch := range chaosChecks {
		if n := sum.Checks[ch.name]; n > 0 {
			broken = append(broken, fmt.Sprintf("%s %d", ch.name, n))
		}
	}
	return fmt.Errorf("%w: seed %d: %s", ErrFailed, sum.Seed, strings.Join(broken, ", "))
}
