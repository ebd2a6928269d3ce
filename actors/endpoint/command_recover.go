package endpoint

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// handleRecover checks a RecoverEndpointRequest, then lists its window
// (recovery_window.go): the manifest of a dry run, or the job started.
func (g *grain) handleRecover(ctx actor.Context, r *request) {
	rq := r.Cmd.GetRecover()
	e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId())
	switch {
	case e != nil:
	case rq.GetSince() == nil || rq.GetUntil() == nil:
		e = command.Invalid("since", "since and until are required: give the range of planned times to recover")
	case !rq.GetSince().AsTime().Before(rq.GetUntil().AsTime()):
		e = command.Invalid("until", "must be after since: give a window whose until comes after its since")
	}
	var w window
	if e == nil {
		w, e = windowOf(g.state.TenantID, g.id, rq)
	}
	if e == nil && !rq.GetDryRun() {
		e = g.canRecover()
	}
	if e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	g.handleWindow(ctx, r, w)
}

// handleGetRecovery answers a recovery's progress.
func (g *grain) handleGetRecovery(ctx actor.Context, r *request) {
	rq := r.Cmd.GetGetRecovery()
	if e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId()); e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	rec, ok := g.state.Recovery(rq.GetRecoveryId())
	if !ok {
		refuse(ctx, r.Sender, command.NotFound("recovery_id", "recovery %q not found (an endpoint keeps its last %d recoveries)", rq.GetRecoveryId(), MaxRecoveries))
		return
	}
	reply(ctx, r.Sender, &internalv1.EndpointReply{Recovery: g.recoveryView(rec)})
}

// handleListRecoveries answers the recoveries the endpoint remembers,
// newest first.
func (g *grain) handleListRecoveries(ctx actor.Context, r *request) {
	rq := r.Cmd.GetListRecoveries()
	if e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId()); e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	rep := &internalv1.EndpointReply{}
	for i := len(g.state.Recoveries) - 1; i >= 0; i-- {
		rep.Recoveries = append(rep.Recoveries, g.recoveryView(g.state.Recoveries[i]))
	}
	reply(ctx, r.Sender, rep)
}

// recoveryView is a recovery as the control API shows it: as recorded, with
// the live counts of the page under way when this activation runs it.
func (g *grain) recoveryView(rec Recovery) *controlv1.Recovery {
	v := &controlv1.Recovery{
		RecoveryId: rec.ID, EndpointId: g.id, Since: timestamppb.New(rec.Since), Until: timestamppb.New(rec.Until),
		StartedAt: timestamppb.New(rec.StartedAt), Found: rec.Found, Requested: rec.Requested, State: "running",
		Statuses: rec.Statuses, EventTypes: rec.EventTypes,
	}
	if len(v.Statuses) == 0 {
		v.Statuses = []string{history.Failed.String()}
	}
	if rec.Digest != "" {
		v.Manifest = g.manifest(rec.Deliveries, rec.Digest, nil)
	}
	var runs *recoverer // nil while the loop is off
	if g.loop != nil {
		runs = &g.loop.recovery
	}
	if run := runs.runOf(rec.ID); run != nil {
		v.Found, v.Requested, v.Replayed = run.found, run.requested, run.replayed
	}
	if !rec.Running() {
		v.Done, v.FinishedAt = true, timestamppb.New(rec.FinishedAt)
		v.State = "done"
		if rec.Ended == hooklinev1.RecoveryFinished_REASON_ENDPOINT_NOT_ACTIVE {
			v.State = "endpoint_not_active"
		}
		if run := runs.finishedRun(rec.ID); run != nil {
			v.Replayed = run.replayed
		}
	}
	return v
}

// listed is the result of listing a window for a recover command.
type listed struct {
	w   window
	l   windowList
	err error
}

// handleWindow lists the window of a checked RecoverEndpointRequest, off
// the mailbox, and answers its manifest (dry run) or starts the recovery.
func (g *grain) handleWindow(ctx actor.Context, r *request, w window) {
	rq := r.Cmd.GetRecover()
	log, proj, hist, p := g.cfg.Log, g.cfg.Projections, g.cfg.History, events.PartitionOf(g.id)
	g.core.IO(ctx, r, func(c context.Context) (any, error) {
		// The list reflects every outcome committed before the request.
		head, err := log.Head(c)
		if err != nil {
			return nil, fmt.Errorf("read the log's head: %w", err)
		}
		if err := proj.WaitForPartition(c, p, head); err != nil {
			return nil, fmt.Errorf("wait for the projections: %w", err)
		}
		l, err := w.list(hist)
		return listed{w: w, l: l}, err
	}, func(res any, err error) {
		switch {
		case errors.Is(err, errWindowTooLarge):
			refuse(ctx, r.Sender, command.Invalid("since", "the window lists more than %d deliveries: split it into narrower windows", MaxRecoveryList))
			return
		case err != nil:
			g.log.Warn("endpoint grain cannot list a recovery window", "error", err)
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot list the window's deliveries from the history; retry"))
			return
		}
		l := res.(listed).l
		digest := l.digest()
		if rq.GetDryRun() {
			reply(ctx, r.Sender, &internalv1.EndpointReply{Recovery: &controlv1.Recovery{
				EndpointId: g.id, Since: rq.GetSince(), Until: rq.GetUntil(), State: "dry_run", DryRun: true,
				Statuses: w.statuses, EventTypes: w.eventTypes, Found: int64(len(l.ids)),
				Manifest: g.manifest(int64(len(l.ids)), digest, &l),
			}})
			return
		}
		if d := rq.GetDigest(); d != "" && !strings.EqualFold(d, digest) {
			refuse(ctx, r.Sender, command.FailedPrecondition("digest",
				"the window now lists %d deliveries with digest %s, not the list the dry run described: run the dry run again and check its manifest", len(l.ids), digest))
			return
		}
		if e := g.canRecover(); e != nil {
			refuse(ctx, r.Sender, e)
			return
		}
		g.startWindow(ctx, r, w, l, digest)
	})
}

// canRecover refuses a recovery of an endpoint that is not active, or
// runs one already.
func (g *grain) canRecover() *command.Error {
	if g.state.Status != controlv1.Endpoint_STATUS_ACTIVE {
		return command.FailedPrecondition("", "endpoint %s is %s: resume it before recovering its deliveries", g.id, statusWord(g.state.Status))
	}
	if running, busy := g.state.RunningRecovery(); busy {
		return command.FailedPrecondition("", "recovery %s of endpoint %s is running; wait for it to finish (GET its progress) before starting another", running.ID, g.id)
	}
	return nil
}

// startWindow records the list on recovery-{id}, then RecoveryStarted, and
// starts the run.
func (g *grain) startWindow(ctx actor.Context, r *request, w window, l windowList, digest string) {
	var b [8]byte
	if _, err := io.ReadFull(g.cfg.Rand, b[:]); err != nil {
		reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_INTERNAL, "cannot draw a recovery id from the random source; retry"))
		return
	}
	id := "rcv_" + hex.EncodeToString(b[:])
	stream, now := events.RecoveryStream(id), timestamppb.New(g.cfg.Now())
	chunks := (len(l.ids) + listedChunk - 1) / listedChunk
	evs := make([]events.Event, 0, chunks)
	for i := range chunks {
		m := &hooklinev1.RecoveryListed{
			TenantId: w.tenantID, EndpointId: g.id, RecoveryId: id, Chunk: int32(i), Chunks: int32(chunks),
			DeliveryIds: l.ids[i*listedChunk : min(len(l.ids), (i+1)*listedChunk)], At: now,
		}
		ev, err := events.EncodeIn(m, fmt.Sprintf("recovery.listed/%s/%d", id, i), stream, events.PartitionOf(g.id))
		if err != nil {
			g.log.Error("endpoint grain cannot encode a recovery's list", "recovery_id", id, "error", err)
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_INTERNAL, "cannot encode the recovery's list"))
			return
		}
		evs = append(evs, ev)
	}
	log := g.cfg.Log
	g.core.IO(ctx, r, func(c context.Context) (any, error) {
		if len(evs) == 0 {
			return nil, nil // an empty list: nothing to read back
		}
		_, err := log.Append(c, stream, events.NoStream{}, evs...)
		return nil, err
	}, func(_ any, err error) {
		if err != nil {
			g.log.Warn("endpoint grain cannot record a recovery's list", "recovery_id", id, "error", err)
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot record the recovery's list; retry"))
			return
		}
		rq := r.Cmd.GetRecover()
		started := &hooklinev1.RecoveryStarted{
			TenantId: w.tenantID, EndpointId: g.id, RecoveryId: id, Since: rq.GetSince(), Until: rq.GetUntil(),
			IssuedBy: r.Cmd.GetIssuedBy(), At: now, RequestId: r.Cmd.GetRequestId(),
			Statuses: w.statuses, EventTypes: w.eventTypes, Deliveries: int64(len(l.ids)), Digest: digest,
		}
		g.core.Append(ctx, r, "recover", []proto.Message{started}, g.state.Apply, func() {
			rec, _ := g.state.Recovery(id)
			g.log.Info("recovery started", "recovery_id", id, "since", w.since, "until", w.until, "deliveries", len(l.ids), "digest", digest)
			v := g.recoveryView(rec)
			v.Manifest = g.manifest(int64(len(l.ids)), digest, &l)
			reply(ctx, r.Sender, &internalv1.EndpointReply{Recovery: v})
			g.loop.recovery.runList(ctx, rec, l.ids)
		})
	})
}

// manifest describes a list of n deliveries with digest; l, when given,
// adds the first ids and the planned times it spans.
func (g *grain) manifest(n int64, digest string, l *windowList) *controlv1.RecoveryManifest {
	r, b := g.state.rate(g.cfg.RatePerSecond, g.cfg.Burst)
	m := &controlv1.RecoveryManifest{Deliveries: n, Digest: digest, RatePerSecond: r, Burst: int32(b)}
	if over := n - int64(b); over > 0 && r > 0 {
		m.EstimatedSeconds = float64(over) / r
	}
	if l != nil {
		m.FromArchive = l.before(g.cfg.Now().Add(-g.cfg.EventRetention))
		m.DeliveryIds = l.ids[:min(len(l.ids), manifestIDs)]
		if len(l.ids) > 0 {
			m.FirstPlannedAt, m.LastPlannedAt = timestamppb.New(l.first), timestamppb.New(l.last)
		}
	}
	return m
}

// manifestIDs is how many of the list's first ids a manifest shows.
const manifestIDs = 20

// listedChunk is how many delivery ids one RecoveryListed holds.
const listedChunk = 1000
