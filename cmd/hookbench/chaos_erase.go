package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// An erasure, and what must not be readable after it: each erased event's
// marker (chaosMarker) must be in no answer of the API, no message sent
// and no file. The reads are made right after the erasure and again at
// the end of the run, of a sample of the events the erasure erased for
// sure (published before it began); the files are read once the nodes
// have stopped.

// probeSample bounds the events read back after an erasure: the latest
// ones, and the latest that broke their schema (whose violation quotes
// the marker).
const probeSample = 4

// erase erases the action's tenant: a control read first (the marker of
// its latest event delivered must be readable, or the reads after prove
// nothing), the erasure (asked once: a retry would erase what was
// published since), then the reads after.
func (c *chaosRun) erase(ctx context.Context, a chaosAction, st *chaosStep) error {
	t := c.tenants[a.Tenant]
	sample := c.sample(t)
	if len(sample) > 0 {
		c.probe(ctx, t, sample[:1], true)
	}
	x := chaosErasure{tenant: t.ID, began: time.Now()}
	var resp *controlv1.EraseTenantResponse
	apis := c.sys.live()
	err := fmt.Errorf("no node is up")
	if len(apis) > 0 {
		err = apis[0].invoke(ctx, func(ctx context.Context, cc *controlClients) (err error) {
			resp, err = cc.tenants.EraseTenant(ctx, &controlv1.EraseTenantRequest{TenantId: t.ID, Confirm: t.ID})
			return err
		})
	}
	x.answered, x.done = time.Now(), err == nil
	if err != nil && retryable(err) {
		// Done or not, the tenant's erased_at says.
		var ten *controlv1.Tenant
		rerr := c.rpc(ctx, func(ctx context.Context, cc *controlClients) (err error) {
			ten, err = cc.tenants.GetTenant(ctx, &controlv1.GetTenantRequest{TenantId: t.ID})
			return err
		})
		x.answered = time.Now()
		x.done = rerr == nil && !ten.GetErasedAt().AsTime().Before(x.began.Add(-time.Second))
		err = fmt.Errorf("%w; erased: %v", err, x.done)
	}
	c.rec.note(func(r *chaosRecorder) { r.erasures = append(r.erasures, x) })
	if !x.done {
		return err
	}
	st.Note = fmt.Sprintf("data key %s, %d events read back", resp.GetDataKeyId(), len(sample))
	for _, p := range sample {
		st.Events = append(st.Events, p.event)
	}
	c.mu.Lock()
	c.samples[t.ID] = append(c.samples[t.ID], sample...)
	c.mu.Unlock()
	c.probe(ctx, t, sample, false)
	return nil
}

// probeTarget is an event read back after an erasure, and the delivery
// of it read back.
type probeTarget struct{ event, delivery string }

// sample returns the tenant's events to read back after an erasure: the
// latest pushed to an endpoint that answered 200 or 201 (so that the
// attempt kept the answer's echo of the marker), then the latest that
// broke their schema.
func (c *chaosRun) sample(t *Tenant) []probeTarget {
	var all []*entry
	c.b.ledger.mu.Lock()
	for k, e := range c.b.ledger.events {
		if k.tenant == t.ID {
			all = append(all, e)
		}
	}
	c.b.ledger.mu.Unlock()
	slices.SortFunc(all, func(a, b *entry) int { return b.ack.Compare(a.ack) })
	var latest, violating []probeTarget
	c.rec.note(func(r *chaosRecorder) {
		echoed := map[string]bool{}
		for _, s := range r.seen {
			echoed[s.Delivery] = echoed[s.Delivery] || (s.Host != pullHost && (s.Status == 200 || s.Status == 201))
		}
		for _, e := range all {
			if i := slices.IndexFunc(e.ids, func(id string) bool { return echoed[id] }); i >= 0 && len(latest) < probeSample {
				latest = append(latest, probeTarget{e.id, e.ids[i]})
			}
			if len(violating) < probeSample && r.violating[e.id] && len(e.ids) > 0 {
				violating = append(violating, probeTarget{e.id, e.ids[0]})
			}
		}
	})
	return append(latest, violating...)
}

// probe reads the tenant's events back through the API and records
// whether each answer holds the event's marker: the event, its stream in
// the audit, its first delivery (the receiver echoed the marker in its
// answer), and, after an erasure on a cluster (no retention there to drop
// the event and make it new), a publish of the same event again.
func (c *chaosRun) probe(ctx context.Context, t *Tenant, targets []probeTarget, control bool) {
	for _, target := range targets {
		id := target.event
		marker := chaosMarker(c.sched.Seed, id)
		reads := []struct {
			what string
			call func(ctx context.Context, cc *controlClients) (proto.Message, error)
		}{
			{"GetEvent", func(ctx context.Context, cc *controlClients) (proto.Message, error) {
				return cc.events.GetEvent(ctx, &controlv1.GetEventRequest{TenantId: t.ID, EventId: id})
			}},
			{"GetDelivery", func(ctx context.Context, cc *controlClients) (proto.Message, error) {
				if target.delivery == "" {
					return nil, nil
				}
				return cc.deliveries.GetDelivery(ctx, &controlv1.GetDeliveryRequest{TenantId: t.ID, DeliveryId: target.delivery})
			}},
		}
		if !control {
			reads = append(reads, struct {
				what string
				call func(ctx context.Context, cc *controlClients) (proto.Message, error)
			}{"ReadStream (audit)", func(ctx context.Context, cc *controlClients) (proto.Message, error) {
				return cc.audit.ReadStream(ctx, &controlv1.ReadStreamRequest{Stream: "event-" + t.ID + "." + id, PageSize: 50})
			}})
			if c.sys.cluster != nil {
				c.mu.Lock()
				ev := c.event(id)
				c.mu.Unlock()
				reads = append(reads, struct {
					what string
					call func(ctx context.Context, cc *controlClients) (proto.Message, error)
				}{"Publish again", func(ctx context.Context, cc *controlClients) (proto.Message, error) {
					return cc.events.PublishBatch(ctx, &controlv1.PublishBatchRequest{TenantId: t.ID, Events: []*controlv1.PublishRequest{ev}})
				}})
			}
		}
		for _, r := range reads {
			p := chaosProbe{what: r.what, tenant: t.ID, event: id, at: time.Now(), control: control}
			var got []byte
			err := c.rpc(ctx, func(ctx context.Context, cc *controlClients) error {
				m, err := r.call(ctx, cc)
				if err == nil && m != nil {
					got, err = proto.Marshal(m)
				}
				return err
			})
			if err != nil {
				p.err = err.Error()
				got = append(got, status.Convert(err).Message()...)
			}
			p.found = bytes.Contains(got, []byte(marker))
			c.rec.note(func(r *chaosRecorder) { r.probes = append(r.probes, p) })
		}
	}
}

// event returns the publish request of an event of the run; c.mu must be
// held.
func (c *chaosRun) event(id string) *controlv1.PublishRequest {
	for _, evs := range c.batches {
		for _, ev := range evs {
			if ev.GetEventId() == id {
				return ev
			}
		}
	}
	return nil
}

// probeAgain reads every erased tenant's sample back once more, at the
// end of the run.
func (c *chaosRun) probeAgain(ctx context.Context) {
	for _, t := range c.tenants {
		c.mu.Lock()
		sample := slices.Clone(c.samples[t.ID])
		c.mu.Unlock()
		c.probe(ctx, t, sample, false)
	}
}

// erasedMarkers returns the markers of the events an erasure erased for
// sure (published before it began), and their events.
func (c *chaosRun) erasedMarkers() map[string]string {
	f := c.facts(chaosEnd{})
	out := map[string]string{}
	for _, e := range f.events {
		if f.erasedBefore(e) != nil {
			out[e.marker] = e.id
		}
	}
	return out
}

// fileHit is an erased event's marker found in a file.
type fileHit struct{ file, event string }

// scanMarkers reads every file under dirs and returns where it finds one
// of the markers (a marker is "~" and markerLen letters and digits: every
// "~" is looked up). A file that cannot be read is skipped.
func scanMarkers(dirs []string, markers map[string]string) []fileHit {
	if len(markers) == 0 {
		return nil
	}
	var out []fileHit
	seen := map[fileHit]bool{}
	for _, dir := range dirs {
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for i := 0; ; {
				j := bytes.IndexByte(data[i:], '~')
				if j < 0 || i+j+1+markerLen > len(data) {
					break
				}
				i += j
				if ev, ok := markers[string(data[i:i+1+markerLen])]; ok && !seen[fileHit{path, ev}] {
					seen[fileHit{path, ev}] = true
					out = append(out, fileHit{file: path, event: ev})
				}
				i++
			}
			return nil
		})
	}
	return out
}
