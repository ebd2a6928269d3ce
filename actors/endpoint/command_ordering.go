package endpoint

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// OrderingKeys reads the ordering keys of the node's partitions that have
// a head delivery; *due.Due satisfies it.
type OrderingKeys interface {
	Keys(endpointID string, blockedOnly bool, limit int) ([]due.KeyState, error)
	Key(endpointID, key string) (due.KeyState, bool, error)
}

// Bounds of ListOrderingKeys.
const (
	defaultKeysPage = 100
	maxKeysPage     = 1000
)

// DefaultKeysPage and MaxKeysPage bound ListOrderingKeys' page_size (0
// means DefaultKeysPage); the control API refuses a page_size out of them
// before it asks the grain.
const (
	DefaultKeysPage = defaultKeysPage
	MaxKeysPage     = maxKeysPage
)

// handleListOrderingKeys answers the endpoint's keys with a head, from the
// due index.
func (g *grain) handleListOrderingKeys(ctx actor.Context, r *request) {
	rq := r.Cmd.GetListOrderingKeys()
	e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId())
	blockedOnly := true
	switch {
	case e != nil:
	case rq.GetState() == "" || rq.GetState() == "blocked":
	case rq.GetState() == "all":
		blockedOnly = false
	default:
		e = command.Invalid("state", "is %q; use \"blocked\" (the default) or \"all\"", rq.GetState())
	}
	size := int(rq.GetPageSize())
	if e == nil && (size < 0 || size > maxKeysPage) {
		e = command.Invalid("page_size", "is %d; use 1 to %d (0 means %d)", size, maxKeysPage, defaultKeysPage)
	}
	if e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	if size == 0 {
		size = defaultKeysPage
	}
	keys, id := g.cfg.OrderingKeys, g.id
	if keys == nil {
		refuse(ctx, r.Sender, noOrderingKeys())
		return
	}
	g.core.IO(ctx, r, func(context.Context) (any, error) {
		return keys.Keys(id, blockedOnly, size)
	}, func(res any, err error) {
		if err != nil {
			g.log.Error("endpoint grain cannot read its ordering keys", "error", err)
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot read the ordering keys; retry"))
			return
		}
		rep, now := &internalv1.EndpointReply{}, g.cfg.Now()
		for _, k := range res.([]due.KeyState) {
			rep.OrderingKeys = append(rep.OrderingKeys, keyView(k, now))
		}
		reply(ctx, r.Sender, rep)
	})
}

func noOrderingKeys() *command.Error {
	return command.FailedPrecondition("", "this node does not read ordering keys; send the call to a node that serves deliveries")
}

// keyView is a key as the control API shows it.
func keyView(k due.KeyState, now time.Time) *controlv1.OrderingKey {
	v := &controlv1.OrderingKey{OrderingKey: k.OrderingKey, HeadDeliveryId: k.Head, State: "active", Waiting: int32(k.Waiting)}
	switch {
	case k.Parked:
		v.State = "parked"
	case k.Blocked():
		v.State = "blocked"
	}
	if !k.BlockedSince.IsZero() {
		v.BlockedSince = timestamppb.New(k.BlockedSince)
		v.WaitedSeconds = int64(now.Sub(k.BlockedSince) / time.Second)
	}
	return v
}

// handleSkipOrderingKey ends a key's head: it finds the head in the due
// index and its event in the history, holds the head's delivery as a
// flight (reading its stream) and appends OrderingKeySkipped to it.
func (g *grain) handleSkipOrderingKey(ctx actor.Context, r *request) {
	rq, tenantID := r.Cmd.GetSkipOrderingKey(), r.Cmd.GetTenantId()
	e := g.checkOwn(tenantID, rq.GetTenantId(), rq.GetEndpointId())
	if e == nil && rq.GetOrderingKey() == "" {
		e = command.Invalid("ordering_key", "is required: name the key whose head to skip")
	}
	if e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	keys, hist, id, key := g.cfg.OrderingKeys, g.cfg.History, g.id, rq.GetOrderingKey()
	if keys == nil {
		refuse(ctx, r.Sender, noOrderingKeys())
		return
	}
	type found struct {
		k  due.KeyState
		d  history.Delivery
		ok bool
	}
	g.core.IO(ctx, r, func(context.Context) (any, error) {
		k, ok, err := keys.Key(id, key)
		if err != nil || !ok {
			return found{}, err
		}
		d, ok, err := hist.Get(tenantID, k.Head)
		return found{k: k, d: d, ok: ok}, err
	}, func(res any, err error) {
		if err != nil {
			g.log.Error("endpoint grain cannot read an ordering key", "error", err)
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot read the ordering key; retry"))
			return
		}
		f := res.(found)
		if !f.ok {
			refuse(ctx, r.Sender, command.NotFound("ordering_key", "endpoint %s has no delivery of ordering key %q waiting: nothing to skip", id, key))
			return
		}
		if want := rq.GetHeadDeliveryId(); want != "" && want != f.k.Head {
			refuse(ctx, r.Sender, command.FailedPrecondition("head_delivery_id", "ordering key %q has moved on: its head is now %s, not %s; list the keys again", key, f.k.Head, want))
			return
		}
		g.loop.skips.start(ctx, &skipOrder{sender: r.Sender, by: r.Cmd.GetIssuedBy(), requestID: r.Cmd.GetRequestId(), key: f.k}, f.d)
	})
}
