package control

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Cluster reports the figures of every member of the cluster; the node's
// status service satisfies it.
type Cluster interface {
	Status(ctx context.Context) (*controlv1.ClusterStatus, error)
}

// ListTenants lists the tenants and their quotas (admin only).
func (s *Server) ListTenants(ctx context.Context, req *controlv1.ListTenantsRequest) (*controlv1.ListTenantsResponse, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if err := checkPage("page_size", req.GetPageSize(), 500, 100); err != nil {
		return nil, toStatus(err)
	}
	ts, next, err := s.cfg.Registry.ListTenants(req.GetCursor(), int(req.GetPageSize()))
	if errors.Is(err, registry.ErrBadCursor) {
		return nil, toStatus(invalid("cursor", "is not a cursor of this list; pass next_cursor from the previous page unchanged"))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	out := &controlv1.ListTenantsResponse{NextCursor: next}
	for _, t := range ts {
		out.Tenants = append(out.Tenants, &controlv1.Tenant{
			TenantId: t.ID, Name: t.Name, CreatedAt: timestamppb.New(t.CreatedAt),
			Quota: &hooklinev1.Quota{AttemptsPerSecond: t.Quota.AttemptsPerSecond, MaxInFlight: t.Quota.MaxInFlight, Weight: t.Quota.Weight},
		})
	}
	return out, nil
}

// GetClusterStatus reports every member's figures (admin only).
func (s *Server) GetClusterStatus(ctx context.Context, _ *controlv1.GetClusterStatusRequest) (*controlv1.ClusterStatus, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if s.cfg.Cluster == nil {
		return nil, status.Error(codes.Unavailable, "cluster status is not served by this node")
	}
	st, err := s.cfg.Cluster.Status(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return st, nil
}
