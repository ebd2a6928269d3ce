package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// resealWorkers is how many endpoint grains a reseal asks at once.
const resealWorkers = 16

// ResealSecrets rotates the master key without downtime (admin only): it
// asks every live endpoint's grain to seal, under this node's current
// master key, each secret sealed under another, and when every endpoint
// did, it retires the other registered master keys (seal.RetireOthers),
// which the nodes may then drop. A grain on a node whose current key
// differs refuses, and then nothing is retired: run it once every node
// has the new key first.
//
// The live endpoints are found by reading the log's EndpointCreated and
// EndpointDeleted events (the registry lists endpoints per tenant only), so
// a reseal reads the whole log once; it is an operator's rare command.
func (s *Server) ResealSecrets(ctx context.Context, _ *controlv1.ResealSecretsRequest) (*controlv1.ResealSecretsResponse, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	kr := s.cfg.Keyring
	if kr == nil {
		return nil, status.Error(codes.FailedPrecondition, "this node was started without its keyring; reseal through a node of the cluster")
	}
	eps, err := liveEndpoints(ctx, s.cfg.Log)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &controlv1.ResealSecretsResponse{CurrentKeyId: kr.CurrentID(), Endpoints: int64(len(eps))}
	var mu sync.Mutex // guards resp.Failed
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(resealWorkers)
	for _, ep := range eps {
		g.Go(func() error {
			cmd := &internalv1.EndpointCommand{IssuedBy: c.Actor(), TenantId: ep.tenantID,
				Command: &internalv1.EndpointCommand_Reseal{Reseal: &internalv1.Reseal{TenantId: ep.tenantID, EndpointId: ep.id, KeyId: kr.CurrentID()}}}
			if _, err := s.askEndpoint(gctx, ep.tenantID, ep.id, cmd); err != nil {
				mu.Lock()
				resp.Failed = append(resp.Failed, fmt.Sprintf("%s: %v", ep.id, err))
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // the workers report into resp.Failed
	if err := ctx.Err(); err != nil {
		return nil, toStatus(err)
	}
	n, err := s.cfg.Payloads.Reseal(ctx)
	resp.DataKeys = int64(n)
	if err != nil {
		resp.Failed = append(resp.Failed, fmt.Sprintf("data keys: %v", err))
	}
	if len(resp.Failed) > 0 {
		slices.Sort(resp.Failed)
		s.cfg.Logger.Warn("reseal incomplete; no master key retired", "endpoints", len(eps), "failed", len(resp.Failed))
		return resp, nil
	}
	if resp.RetiredKeyIds, err = seal.RetireOthers(ctx, s.cfg.Log, kr, c.Actor(), s.cfg.Now()); err != nil {
		return nil, toStatus(err)
	}
	s.cfg.Logger.Info("secrets resealed", "endpoints", len(eps), "key_id", kr.CurrentID(), "retired_key_ids", resp.RetiredKeyIds)
	return resp, toStatus(s.settle(ctx))
}

type endpointRef struct{ id, tenantID string }

// liveEndpoints reads the log up to its head for the endpoints created and
// not deleted, in id order.
func liveEndpoints(ctx context.Context, log events.Log) ([]endpointRef, error) {
	head, err := log.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("read log head: %w", err)
	}
	live := map[string]string{}
	const page = 1000
	for pos := events.Start; pos.Less(head); {
		recs, err := log.ReadAll(ctx, pos, page)
		if err != nil {
			return nil, fmt.Errorf("read log after %s: %w", pos, err)
		}
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			r := &recs[i]
			if events.Category(r.Stream) != events.EndpointCategory || (r.Type != "EndpointCreated" && r.Type != "EndpointDeleted") {
				continue
			}
			msg, err := events.Decode(r)
			if err != nil {
				return nil, err
			}
			switch m := msg.(type) {
			case *hooklinev1.EndpointCreated:
				live[m.GetEndpointId()] = m.GetTenantId()
			case *hooklinev1.EndpointDeleted:
				delete(live, m.GetEndpointId())
			}
		}
		pos = recs[len(recs)-1].Position
	}
	out := make([]endpointRef, 0, len(live))
	for id, tenant := range live {
		out = append(out, endpointRef{id: id, tenantID: tenant})
	}
	slices.SortFunc(out, func(a, b endpointRef) int { return strings.Compare(a.id, b.id) })
	return out, nil
}
