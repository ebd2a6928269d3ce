package control

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Grain kinds, as registered by the node.
const (
	TenantKind   = "tenant"
	EndpointKind = "endpoint"
)

func (s *Server) askTenant(ctx context.Context, tenantID string, cmd *internalv1.TenantCommand) (*internalv1.TenantReply, error) {
	if cmd.RequestId == "" {
		// Names this command: the node may repeat it after a timeout, and
		// the grain answers a repeat from the first run's events.
		cmd.RequestId = newID("req_")
	}
	return askGrain[*internalv1.TenantReply](ctx, s.cfg.Grains, TenantKind, tenantID, cmd)
}

// askGrain sends cmd to the grain kind/id and returns its reply, or the
// domain error the grain answered as a grainError.
func askGrain[R interface {
	proto.Message
	GetError() *internalv1.GrainError
}](ctx context.Context, g Grains, kind, id string, cmd proto.Message) (R, error) {
	var zero R
	msg, err := g.Request(ctx, kind, id, cmd)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", kind, id, err)
	}
	reply, ok := msg.(R)
	if !ok {
		return zero, fmt.Errorf("%s %s: unexpected reply %T", kind, id, msg)
	}
	if e := reply.GetError(); e != nil {
		return zero, grainError{e}
	}
	return reply, nil
}

// adminTenant runs an admin's command on a tenant's grain and answers once
// every member has applied it; the reply comes with the settle's error.
func (s *Server) adminTenant(ctx context.Context, tenantID string, cmd *internalv1.TenantCommand) (*internalv1.TenantReply, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkID("tenant_id", tenantID); err != nil {
		return nil, toStatus(err)
	}
	cmd.IssuedBy = c.Actor()
	reply, err := s.askTenant(ctx, tenantID, cmd)
	if err != nil {
		return nil, toStatus(err)
	}
	return reply, toStatus(s.settle(ctx))
}

// CreateTenant registers a tenant (admin only).
func (s *Server) CreateTenant(ctx context.Context, req *controlv1.CreateTenantRequest) (*controlv1.Tenant, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	req = cloneOf(req)
	if req.TenantId == "" {
		req.TenantId = newID("ten_")
	} else if err := checkID("tenant_id", req.TenantId); err != nil {
		return nil, toStatus(err)
	}
	if len(req.GetName()) > 200 {
		return nil, toStatus(invalid("name", "is longer than 200 characters"))
	}
	reply, err := s.adminTenant(ctx, req.TenantId, &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Create{Create: req}})
	return reply.GetTenant(), err
}

// GetTenant returns a tenant: the admin may read any, a key its own.
func (s *Server) GetTenant(ctx context.Context, req *controlv1.GetTenantRequest) (*controlv1.Tenant, error) {
	tenantID, c, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if req.GetAsOf() != "" {
		v, err := s.tenantAsOf(ctx, tenantID, req.GetAsOf())
		return v, toStatus(err)
	}
	reply, err := s.askTenant(ctx, tenantID, &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{TenantId: tenantID}}})
	if err != nil {
		return nil, toStatus(err)
	}
	return reply.GetTenant(), nil
}

// IssueApiKey issues an API key, returned once (admin only).
func (s *Server) IssueApiKey(ctx context.Context, req *controlv1.IssueApiKeyRequest) (*controlv1.IssueApiKeyResponse, error) {
	reply, err := s.adminTenant(ctx, req.GetTenantId(), &internalv1.TenantCommand{Command: &internalv1.TenantCommand_IssueKey{IssueKey: req}})
	return reply.GetKey(), err
}

// RevokeApiKey revokes an API key (admin only).
func (s *Server) RevokeApiKey(ctx context.Context, req *controlv1.RevokeApiKeyRequest) (*controlv1.Tenant, error) {
	reply, err := s.adminTenant(ctx, req.GetTenantId(), &internalv1.TenantCommand{Command: &internalv1.TenantCommand_RevokeKey{RevokeKey: req}})
	return reply.GetTenant(), err
}

// SetQuota changes a tenant's quota (admin only).
func (s *Server) SetQuota(ctx context.Context, req *controlv1.SetQuotaRequest) (*controlv1.Tenant, error) {
	reply, err := s.adminTenant(ctx, req.GetTenantId(), &internalv1.TenantCommand{Command: &internalv1.TenantCommand_SetQuota{SetQuota: req}})
	return reply.GetTenant(), err
}
