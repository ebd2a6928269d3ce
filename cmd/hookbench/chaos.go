package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The chaos run: `hookbench run chaos --seed N --duration D` plays a
// seeded schedule of actions (chaos_schedule.go) against three nodes on a
// PostgreSQL server of its own, or one node on the embedded log
// (--nodes 1), while a receiver with two hosts and pull consumers record
// everything they get (chaos_record.go). After the schedule it lets the
// work drain, reconciles, reads the erased tenants' events again and the
// run's files, and checks every promise of docs/semantics.md from what it
// saw (chaos_check.go); a broken promise is printed with the seed and the
// smallest trace that shows it (chaos_trace.go).

// chaosRole is what an endpoint of a chaos tenant may undergo.
type chaosRole struct {
	ordered       bool // it orders by key
	secretHeaders bool // it carries chaosSecretHeader, whose value changes
	moves         bool // its URL moves between the receiver's two hosts
	pulls         bool // it switches between push and pull
	flaky         bool // its receiver fails some requests (5xx, 429, 400)
}

// chaosRoles are the endpoints of every chaos tenant, by index.
var chaosRoles = []chaosRole{
	{ordered: true, secretHeaders: true, moves: true},
	{ordered: true, pulls: true},
	{secretHeaders: true, moves: true},
	{pulls: true},
	{flaky: true},
	{ordered: true, flaky: true},
}

// chaosFanouts are the tenants' fan-outs: each event of tenant i goes to
// chaosFanouts[i] of its endpoints (all of them: one type, "*").
var chaosFanouts = [chaosTenants]int{3, 1, len(chaosRoles)}

// chaosRetention is the embedded node's --retention for a run of d: short
// enough that the run's restarts pass it, longer than a delivery's life
// in a calm run.
func chaosRetention(d time.Duration) time.Duration {
	return min(max(d/4, 20*time.Second), 2*time.Minute)
}

// chaosEndpoint is the run's model of one endpoint: what the run set.
type chaosEndpoint struct {
	tenant *Tenant
	ti, ei int
	name   string // the bench's name, the receiver's path
	id     string // the node's id
	role   chaosRole
	host   int // the receiver's host its URL names: 0 or 1
	query  int // its URL's ?v= (-1: none)
	pull   bool
	secret string // its secret header's value ("" none)
}

// chaosRun is one chaos run under way.
type chaosRun struct {
	b       *Bench
	sched   chaosSchedule
	sys     *chaosSystem
	rec     *chaosRecorder
	hosts   [2]string // the receiver's addresses
	tenants []*Tenant
	start   time.Time

	mu      sync.Mutex // guards the fields below
	eps     map[string]*chaosEndpoint
	batches map[int][]*controlv1.PublishRequest // each publish's events, by its action's N
	samples map[string][]probeTarget            // by tenant: the events read back after its erasures
}

// runChaos is the chaos scenario (its own report and JSON line).
func runChaos(ctx context.Context, b *Bench, stdout io.Writer) error {
	sched := newChaosSchedule(b.cfg.Seed, b.cfg.Duration, b.cfg.Nodes)
	fmt.Fprintf(b.stderr, "hookbench: chaos: seed %d, %v, %d node(s): %d actions, schedule %s\n",
		sched.Seed, sched.Duration, sched.Nodes, len(sched.Actions), sched.Digest())
	if b.cfg.ScheduleOnly {
		for _, a := range sched.Actions {
			fmt.Fprintln(stdout, a)
		}
		_, err := fmt.Fprintf(stdout, "schedule %s: seed %d, %v, %d node(s), %d actions\n", sched.Digest(), sched.Seed, sched.Duration, sched.Nodes, len(sched.Actions))
		return err
	}
	// The run's names come from the seed too, so that two runs of a seed
	// name the same tenants, endpoints and events (each run has a log of
	// its own).
	b.runID = fmt.Sprintf("chaos%d", sched.Seed)
	c := &chaosRun{b: b, sched: sched, rec: newChaosRecorder(), eps: map[string]*chaosEndpoint{}, batches: map[int][]*controlv1.PublishRequest{}, samples: map[string][]probeTarget{}}
	var err error
	c.hosts[0] = b.recv.Addr()
	if c.hosts[1], err = b.recv.ListenAlso("127.0.0.2:0"); err != nil {
		return err
	}
	b.recv.SetWatcher(c.rec)
	if c.sys, err = startChaosSystem(ctx, b, b.cfg.Nodes, chaosRetention(b.cfg.Duration)); err != nil {
		return err
	}
	defer func() {
		if err := c.sys.close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(b.stderr, "hookbench: chaos: %v\n", err)
		}
	}()
	b.api, b.apis = c.sys.apis[0], slices.Clone(c.sys.apis)
	if err := b.api.CreateTenant(ctx, pgProbeTenant); err != nil {
		return fmt.Errorf("chaos: setup: %w", err)
	}
	if err := c.setup(ctx); err != nil {
		return fmt.Errorf("chaos: setup: %w", err)
	}
	stopProgress := b.withProgress(ctx)
	defer stopProgress()
	cctx, stopConsumers := context.WithCancel(ctx)
	consumers := c.consume(cctx)
	c.start = time.Now()
	c.play(ctx)
	fmt.Fprintf(b.stderr, "hookbench: chaos: schedule played in %.1f s; draining\n", time.Since(c.start).Seconds())
	end := c.finish(ctx)
	stopConsumers()
	consumers.Wait()
	stopProgress()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := c.sys.stop(); err != nil {
		end.notes = append(end.notes, err.Error())
	}
	end.files = scanMarkers(c.sys.dirs(), c.erasedMarkers())
	return c.report(stdout, end)
}

// setup creates the tenants, their endpoints (settings by role), their
// schemas (warn) and the receiver's behaviours.
func (c *chaosRun) setup(ctx context.Context) error {
	b := c.b
	for i := range chaosTenants {
		name := fmt.Sprintf("t%d", i)
		secret := func(j int) string { return fmt.Sprintf("%s_%s_e%d-init", b.runID, name, j) }
		each := make([]*controlv1.EndpointSettings, len(chaosRoles))
		for j, role := range chaosRoles {
			each[j] = &controlv1.EndpointSettings{}
			if role.ordered {
				each[j].Ordering = "key"
			}
			if role.secretHeaders {
				each[j].SecretHeaders = map[string]string{chaosSecretHeader: secret(j)}
			}
		}
		began := time.Now()
		t, err := b.AddTenant(ctx, TenantSpec{Name: name, Endpoints: len(chaosRoles), Fanout: chaosFanouts[i], Each: each, Await: true})
		if err != nil {
			return err
		}
		c.tenants = append(c.tenants, t)
		ids := map[string]string{}
		for id, ep := range t.names {
			ids[ep] = id
		}
		for j, ep := range t.Endpoints {
			m := &chaosEndpoint{tenant: t, ti: i, ei: j, name: ep, id: ids[ep], role: chaosRoles[j], query: -1}
			if m.role.secretHeaders {
				m.secret = secret(j)
				c.rec.note(func(r *chaosRecorder) {
					r.grants[ep] = append(r.grants[ep], headerGrant{value: m.secret, host: c.hosts[0], at: began})
				})
			}
			c.eps[ep] = m
			b.recv.SetBehaviour(ep, m.behaviour())
		}
		if err := c.schemas(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// behaviour is how the receiver answers the endpoint when it is not out:
// with the first bytes of each body (kept as the attempt's response
// prefix, sealed), after 20 ms when it orders by key (a key's requests
// overlap if the node sends two at once), and a few failures when flaky.
func (m *chaosEndpoint) behaviour() Behaviour {
	b := Behaviour{Echo: true}
	if m.role.ordered {
		b.Latency = 20 * time.Millisecond
	}
	if m.role.flaky {
		b.Mix = []StatusWeight{{200, 0.86}, {201, 0.02}, {204, 0.02}, {500, 0.05}, {429, 0.03}, {400, 0.02}}
	}
	return b
}

// schemas makes the tenant's schema enforcement warn and gives each of
// its types a schema whose "email" must start with "ok-": a violating
// payload's marker is then quoted by the violation.
func (c *chaosRun) schemas(ctx context.Context, t *Tenant) error {
	schema, err := structpb.NewValue(map[string]any{"type": "object", "properties": map[string]any{
		"email": map[string]any{"type": "string", "pattern": "^ok-"}}})
	if err != nil {
		return err
	}
	example, err := structpb.NewValue(map[string]any{"email": "ok-example"})
	if err != nil {
		return err
	}
	return c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
		if _, err := cc.tenants.UpdateTenant(ctx, &controlv1.UpdateTenantRequest{TenantId: t.ID,
			Settings: &controlv1.TenantSettings{SchemaEnforcement: "warn"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"schema_enforcement"}}}); err != nil {
			return err
		}
		for _, typ := range t.Types {
			if _, err := cc.types.PutEventType(ctx, &controlv1.PutEventTypeRequest{TenantId: t.ID, EventType: typ, Schema: schema, Example: example}); err != nil {
				return err
			}
		}
		return nil
	})
}

// rpc calls f with the control API of a node up (chaosSystem.call).
func (c *chaosRun) rpc(ctx context.Context, f func(ctx context.Context, cc *controlClients) error) error {
	return c.sys.call(ctx, func(ctx context.Context, api *API) error { return api.invoke(ctx, f) })
}

// play runs every lane of the schedule, each action at its time (or as
// soon as the lane's previous action is done), until the schedule ends.
func (c *chaosRun) play(ctx context.Context) {
	var wg sync.WaitGroup
	for lane := range chaosLanes {
		wg.Go(func() {
			for _, a := range c.sched.Actions {
				if a.Lane != lane {
					continue
				}
				if sleepCtx(ctx, time.Until(c.start.Add(a.At))) != nil {
					return
				}
				st := c.do(ctx, a)
				c.rec.note(func(r *chaosRecorder) { r.steps = append(r.steps, st) })
				if a.Kind != actPublish && a.Kind != actRepublish {
					fmt.Fprintf(c.b.stderr, "hookbench: chaos: %s: %s (%.1f s)\n", a, cmp.Or(st.Err, st.Note, "ok"), st.Ended.Sub(st.Began).Seconds())
				}
			}
		})
	}
	wg.Wait()
}

// endpoint returns the model of the endpoint of an action.
func (c *chaosRun) endpoint(a chaosAction) *chaosEndpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eps[c.tenants[a.Tenant].Endpoints[a.Endpoint]]
}

// consume runs a pull consumer for each endpoint that may switch to
// pull, which pulls while the run has it pulled, until ctx ends.
func (c *chaosRun) consume(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, m := range c.eps {
		if !m.role.pulls {
			continue
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				c.mu.Lock()
				pull := m.pull
				c.mu.Unlock()
				apis := c.sys.live()
				if !pull || len(apis) == 0 {
					_ = sleepCtx(ctx, 100*time.Millisecond)
					continue
				}
				r, err := c.b.pullOnce(ctx, apis[0], m.tenant.ID, m.id, m.name)
				c.rec.note(func(rec *chaosRecorder) { rec.seen = append(rec.seen, pulledSeen(m.name, r)...) })
				if err != nil {
					_ = sleepCtx(ctx, 100*time.Millisecond)
				}
			}
		})
	}
	return &wg
}

// pulledSeen are the messages of a pull round as the run keeps them.
func pulledSeen(endpoint string, r pulled) []chaosSeen {
	var out []chaosSeen
	for _, m := range r.msgs {
		h := m.GetHeaders()
		s := seenFrom(Watched{Endpoint: endpoint, Host: pullHost, Body: BodyHash(m.GetBody()), Arrived: r.at, Header: headerOf(h)})
		switch id := m.GetDeliveryId(); {
		case r.acked[id]:
			s.Status, s.Answered = 200, r.ackedAt
		case r.bad[id]:
			s.Status = 401
		}
		out = append(out, s)
	}
	return out
}
