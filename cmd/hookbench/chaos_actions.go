package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// do runs one action of the schedule and returns it as it ran. An error
// is the node's answer (or none in time): it is recorded, and the run
// goes on.
func (c *chaosRun) do(ctx context.Context, a chaosAction) chaosStep {
	st := chaosStep{Action: a, Began: time.Now()}
	var err error
	switch a.Kind {
	case actPublish:
		err = c.publish(ctx, a, &st)
	case actRepublish:
		err = c.republish(ctx, a, &st)
	case actURL, actHeaders, actPull, actPush:
		err = c.update(ctx, a, &st)
	case actRotate:
		err = c.rotate(ctx, a, &st)
	case actPause, actResume:
		err = c.pause(ctx, a)
	case actOutage, actOutageEnd:
		m := c.endpoint(a)
		b := m.behaviour()
		if a.Kind == actOutage {
			b.Mix = []StatusWeight{{Status: 503, Weight: 1}}
		}
		c.b.recv.SetBehaviour(m.name, b)
	case actErase:
		err = c.erase(ctx, a, &st)
	case actReplay:
		err = c.replay(ctx, a, &st)
	case actRecover:
		err = c.recover(ctx, a, &st)
	default:
		err = c.process(ctx, a, &st)
	}
	st.Ended = time.Now()
	if err != nil {
		st.Err = err.Error()
	}
	return st
}

// chaosKey is the ordering key of a lane's key k.
func chaosKey(lane, k int) string { return fmt.Sprintf("L%dk%d", lane, k) }

// chaosMarker is an event's marker: "~" and 20 letters and digits drawn
// from the seed and the event id, at the start of its payload. It is in
// nothing but the payload (and, for a payload that breaks its schema, the
// violation's text), so finding it anywhere after an erasure is finding
// the erased payload.
func chaosMarker(seed int64, event string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	sum := sha256.Sum256(fmt.Appendf(nil, "chaos/%d/%s", seed, event))
	out := []byte{'~'}
	for _, b := range sum[:markerLen] {
		out = append(out, alphabet[int(b)%len(alphabet)])
	}
	return string(out)
}

// markerLen is the length of a marker after its "~".
const markerLen = 20

// chaosPayload is an event's payload: its marker first (so that an
// echoing receiver's answer holds it), an email that starts with "ok-",
// or is the marker when it is to break its schema.
func chaosPayload(seed int64, event string, violate bool) []byte {
	m := chaosMarker(seed, event)
	email := "ok-" + event
	if violate {
		email = m
	}
	pad := sha256.Sum256([]byte(m))
	return fmt.Appendf(nil, `{"m":%q,"email":%q,"id":%q,"pad":%q}`, m, email, event, hex.EncodeToString(pad[:]))
}

// publish publishes the action's batch through the nodes up, again and
// again until it is accepted.
func (c *chaosRun) publish(ctx context.Context, a chaosAction, st *chaosStep) error {
	t := c.tenants[a.Tenant]
	evs := make([]*controlv1.PublishRequest, a.Events)
	for i := range evs {
		id := fmt.Sprintf("c%d-%d-%d", c.sched.Seed, a.N, i)
		evs[i] = &controlv1.PublishRequest{EventId: id, Type: t.Types[a.Type%len(t.Types)], Payload: chaosPayload(c.sched.Seed, id, a.Violate)}
		if i < len(a.Keys) {
			evs[i].OrderingKey = chaosKey(a.Lane, a.Keys[i])
		}
		st.Events = append(st.Events, id)
	}
	c.mu.Lock()
	c.batches[a.N] = evs
	c.mu.Unlock()
	c.rec.note(func(r *chaosRecorder) {
		for _, id := range st.Events {
			r.firstSent[id] = st.Began
			if a.Violate {
				r.violating[id] = true
			}
		}
	})
	return c.b.publishBatch(ctx, t, evs, Load{APIs: c.sys.live(), Retry: true})
}

// republish publishes an earlier batch again: every event must be
// answered as a duplicate with the deliveries of its first answer.
func (c *chaosRun) republish(ctx context.Context, a chaosAction, st *chaosStep) error {
	c.mu.Lock()
	evs := c.batches[a.Pick]
	c.mu.Unlock()
	if evs == nil {
		st.Note = "its publish did not run"
		return nil
	}
	t := c.tenants[a.Tenant]
	var resps []*controlv1.PublishResponse
	err := c.sys.call(ctx, func(ctx context.Context, api *API) (err error) {
		resps, err = api.PublishBatch(ctx, t.ID, evs)
		return err
	})
	if err != nil {
		return err
	}
	for i, ev := range evs {
		st.Events = append(st.Events, ev.GetEventId())
		first, known := c.b.ledger.plannedIDs(t.ID, ev.GetEventId())
		var got []string
		for _, d := range resps[i].GetDeliveries() {
			got = append(got, d.GetDeliveryId())
		}
		slices.Sort(got)
		why := ""
		switch {
		case !known:
		case !resps[i].GetDuplicate():
			why = "answered as a new event, not a duplicate"
		case !slices.Equal(first, got):
			why = fmt.Sprintf("answered with deliveries %v, first %v", got, first)
		}
		c.rec.note(func(r *chaosRecorder) {
			r.republishes = append(r.republishes, republish{tenant: t.ID, event: ev.GetEventId(), at: st.Began, why: why})
		})
	}
	return nil
}

// url is the endpoint's URL on the receiver's host (0 or 1), with ?v=query
// unless query is -1.
func (c *chaosRun) urlOf(m *chaosEndpoint, host, query int) string {
	u := c.b.recv.URLAt(c.hosts[host], m.name)
	if query >= 0 {
		u += fmt.Sprintf("?v=%d", query)
	}
	return u
}

// update changes the endpoint's URL, secret header or delivery. A secret
// header value given is granted, from the call on, for the host its URL
// names after the call; a URL that moves alone grants nothing.
func (c *chaosRun) update(ctx context.Context, a chaosAction, st *chaosStep) error {
	m := c.endpoint(a)
	c.mu.Lock()
	next := *m
	c.mu.Unlock()
	s := &controlv1.EndpointSettings{}
	var paths []string
	secret := ""
	switch a.Kind {
	case actURL:
		next.host, next.query = a.Host, a.Query
		s.Url, paths = c.urlOf(m, next.host, next.query), []string{"url"}
		if a.WithHeaders {
			secret = fmt.Sprintf("%s-%d", m.name, a.Value)
			paths = append(paths, "secret_headers")
		}
	case actHeaders:
		secret, paths = fmt.Sprintf("%s-%d", m.name, a.Value), []string{"secret_headers"}
	case actPull:
		next.pull, s.Delivery, paths = true, "pull", []string{"delivery", "url"}
	case actPush:
		next.pull, s.Delivery, s.Url, paths = false, "push", c.urlOf(m, next.host, next.query), []string{"delivery", "url"}
	}
	if secret != "" {
		next.secret = secret
		s.SecretHeaders = map[string]string{chaosSecretHeader: secret}
		c.rec.note(func(r *chaosRecorder) {
			r.grants[m.name] = append(r.grants[m.name], headerGrant{value: secret, host: c.hosts[next.host], at: st.Began})
		})
	}
	st.Note = s.Url
	err := c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
		_, err := cc.endpoints.UpdateEndpoint(ctx, &controlv1.UpdateEndpointRequest{TenantId: m.tenant.ID, EndpointId: m.id, Settings: s,
			UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
		return err
	})
	switch {
	case err == nil:
		c.mu.Lock()
		*m = next
		c.mu.Unlock()
	case retryable(err):
		// Done or not: the endpoint as the node has it says.
		err = fmt.Errorf("%w; %v", err, c.readBack(ctx, m))
	}
	return err
}

// readBack sets the model's host, query and delivery of an endpoint from
// the node's answer.
func (c *chaosRun) readBack(ctx context.Context, m *chaosEndpoint) error {
	var ep *controlv1.Endpoint
	err := c.rpc(ctx, func(ctx context.Context, cc *controlClients) (err error) {
		ep, err = cc.endpoints.GetEndpoint(ctx, &controlv1.GetEndpointRequest{TenantId: m.tenant.ID, EndpointId: m.id})
		return err
	})
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	u, err := url.Parse(ep.GetSettings().GetUrl())
	c.mu.Lock()
	defer c.mu.Unlock()
	m.pull = ep.GetSettings().GetDelivery() == "pull"
	if err == nil && u.Host != "" {
		m.host = slices.Index(c.hosts[:], u.Host)
		m.query = -1
		if v := u.Query().Get("v"); v != "" {
			m.query, _ = strconv.Atoi(v)
		}
	}
	return fmt.Errorf("read back: url %q, delivery %s", ep.GetSettings().GetUrl(), ep.GetSettings().GetDelivery())
}

// rotate adds a signing secret, and retires the oldest once four are
// live (the node takes at most five); the receiver verifies with every
// secret the endpoint was given (the earlier ones sign beside the new one
// until they are retired, or for 24 hours).
func (c *chaosRun) rotate(ctx context.Context, a chaosAction, st *chaosStep) error {
	m := c.endpoint(a)
	var r *controlv1.RotateSecretResponse
	err := c.rpc(ctx, func(ctx context.Context, cc *controlClients) (err error) {
		r, err = cc.endpoints.RotateSecret(ctx, &controlv1.RotateSecretRequest{TenantId: m.tenant.ID, EndpointId: m.id})
		return err
	})
	if err != nil {
		return err
	}
	if err := c.b.recv.AddSecret(m.name, r.GetSecret()); err != nil {
		return err
	}
	live := r.GetEndpoint().GetSecrets()
	if len(live) < 4 {
		return nil
	}
	oldest := live[len(live)-1].GetVersion()
	st.Note = fmt.Sprintf("retired version %d", oldest)
	return c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
		_, err := cc.endpoints.RetireSecret(ctx, &controlv1.RetireSecretRequest{TenantId: m.tenant.ID, EndpointId: m.id, Version: oldest})
		return err
	})
}

// pause pauses or resumes the endpoint.
func (c *chaosRun) pause(ctx context.Context, a chaosAction) error {
	m := c.endpoint(a)
	return c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
		var err error
		if a.Kind == actPause {
			_, err = cc.endpoints.PauseEndpoint(ctx, &controlv1.PauseEndpointRequest{TenantId: m.tenant.ID, EndpointId: m.id})
		} else {
			_, err = cc.endpoints.ResumeEndpoint(ctx, &controlv1.ResumeEndpointRequest{TenantId: m.tenant.ID, EndpointId: m.id})
		}
		return err
	})
}

// replay replays a delivery the endpoint got: the Pick-th of them, in the
// order they first came.
func (c *chaosRun) replay(ctx context.Context, a chaosAction, st *chaosStep) error {
	m := c.endpoint(a)
	ids := c.rec.received(m.name)
	if len(ids) == 0 {
		st.Note = "nothing received yet"
		return nil
	}
	st.Delivery = ids[a.Pick%len(ids)]
	c.rec.note(func(r *chaosRecorder) { r.resends = append(r.resends, resend{delivery: st.Delivery, at: st.Began}) })
	return c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
		_, err := cc.deliveries.ReplayDelivery(ctx, &controlv1.ReplayDeliveryRequest{TenantId: m.tenant.ID, DeliveryId: st.Delivery})
		return err
	})
}

// recover starts a window recovery of the endpoint's deliveries of the
// action's status planned over its last For.
func (c *chaosRun) recover(ctx context.Context, a chaosAction, st *chaosStep) error {
	m := c.endpoint(a)
	until := st.Began
	since := until.Add(-a.For)
	c.rec.note(func(r *chaosRecorder) {
		r.resends = append(r.resends, resend{endpoint: m.name, since: since, until: until, at: st.Began})
	})
	return c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
		r, err := cc.endpoints.RecoverEndpoint(ctx, &controlv1.RecoverEndpointRequest{TenantId: m.tenant.ID, EndpointId: m.id,
			Since: timestamppb.New(since), Until: timestamppb.New(until), Statuses: []string{a.Status}})
		st.Note = fmt.Sprintf("%d deliveries", r.GetManifest().GetDeliveries())
		return err
	})
}

// process kills, stops, rebuilds or adds a node, or restarts the
// database; the time it took is a window of the ledger (a delivery may
// be sent again across it).
func (c *chaosRun) process(ctx context.Context, a chaosAction, st *chaosStep) error {
	i := min(max(a.Node, 0), c.sys.count()-1)
	if a.Node >= 0 {
		st.Note = fmt.Sprintf("node %d", i+1)
	}
	var err error
	switch a.Kind {
	case actKill:
		err = c.sys.kill(ctx, i, a.For)
	case actTerm:
		err = c.sys.term(ctx, i, false)
	case actRebuild:
		err = c.sys.term(ctx, i, true)
	case actPGRestart:
		// Its window lasts until every node publishes again, as the
		// acceptance run's.
		if err = c.sys.restartPG(ctx); err == nil {
			_, err = servedAgain(ctx, c.sys.live(), a.N)
		}
	case actJoin:
		err = c.sys.join(ctx)
	}
	c.b.ledger.disturbed(string(a.Kind), st.Began, time.Now())
	return err
}
