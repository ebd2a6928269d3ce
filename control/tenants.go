package control

import (
	"context"
	"fmt"

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
	msg, err := s.cfg.Grains.Request(ctx, TenantKind, tenantID, cmd)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", tenantID, err)
	}
	reply, ok := msg.(*internalv1.TenantReply)
	if !ok {
		return nil, fmt.Errorf("tenant %s: unexpected reply %T", tenantID, msg)
	}
	if e := reply.GetError(); e != nil {
		return nil, grainError{e}
	}
	return reply, nil
}

// CreateTenant registers a tenant (admin only).
func (s *Server) CreateTenant(ctx context.Context, req *controlv1.CreateTenantRequest) (*controlv1.Tenant, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
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
	reply, err := s.askTenant(ctx, req.TenantId, &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_Create{Create: req}})
	if err != nil {
		return nil, toStatus(err)
	}
	return reply.GetTenant(), toStatus(s.settle(ctx))
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
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkID("tenant_id", req.GetTenantId()); err != nil {
		return nil, toStatus(err)
	}
	reply, err := s.askTenant(ctx, req.GetTenantId(), &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_IssueKey{IssueKey: req}})
	if err != nil {
		return nil, toStatus(err)
	}
	return reply.GetKey(), toStatus(s.settle(ctx))
}

// RevokeApiKey revokes an API key (admin only).
func (s *Server) RevokeApiKey(ctx context.Context, req *controlv1.RevokeApiKeyRequest) (*controlv1.Tenant, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkID("tenant_id", req.GetTenantId()); err != nil {
		return nil, toStatus(err)
	}
	reply, err := s.askTenant(ctx, req.GetTenantId(), &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_RevokeKey{RevokeKey: req}})
	if err != nil {
		return nil, toStatus(err)
	}
	return reply.GetTenant(), toStatus(s.settle(ctx))
}

// SetQuota changes a tenant's quota (admin only).
func (s *Server) SetQuota(ctx context.Context, req *controlv1.SetQuotaRequest) (*controlv1.Tenant, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkID("tenant_id", req.GetTenantId()); err != nil {
		return nil, toStatus(err)
	}
	reply, err := s.askTenant(ctx, req.GetTenantId(), &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_SetQuota{SetQuota: req}})
	if err != nil {
		return nil, toStatus(err)
	}
	return reply.GetTenant(), toStatus(s.settle(ctx))
}
