package control

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/eventtype"
	"github.com/hookline/hookline/filter"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

func cloneOf[M proto.Message](m M) M { return proto.CloneOf(m) }

// askEndpoint sends a command to an endpoint grain on behalf of the caller's
// tenant; the grain refuses commands of any other tenant as NOT_FOUND.
func (s *Server) askEndpoint(ctx context.Context, tenantID, endpointID string, cmd *internalv1.EndpointCommand) (*internalv1.EndpointReply, error) {
	if err := checkID("endpoint_id", endpointID); err != nil {
		return nil, err
	}
	cmd.TenantId = tenantID
	if cmd.RequestId == "" {
		// Names this command: the node may repeat it after a timeout, and
		// the grain answers a repeat from the first run's events.
		cmd.RequestId = newID("req_")
	}
	return askGrain[*internalv1.EndpointReply](ctx, s.cfg.Grains, EndpointKind, endpointID, cmd)
}

// changeEndpoint runs a command that changes one endpoint and answers with
// the endpoint, once the projections have seen the change.
func (s *Server) changeEndpoint(ctx context.Context, tenantID, endpointID string, build func(*internalv1.EndpointCommand)) (*controlv1.Endpoint, error) {
	reply, err := s.endpointCommand(ctx, tenantID, endpointID, true, build)
	return reply.GetEndpoint(), err
}

// endpointCommand runs a command on one endpoint for the caller and, when it
// changes state, waits until the projections have seen it.
func (s *Server) endpointCommand(ctx context.Context, requestedTenant, endpointID string, mutates bool, build func(*internalv1.EndpointCommand)) (*internalv1.EndpointReply, error) {
	tenantID, c, err := tenantFor(ctx, requestedTenant)
	if err != nil {
		return nil, err
	}
	cmd := &internalv1.EndpointCommand{IssuedBy: c.Actor()}
	build(cmd)
	reply, err := s.askEndpoint(ctx, tenantID, endpointID, cmd)
	if err != nil {
		return nil, toStatus(err)
	}
	if mutates {
		if err := s.settle(ctx); err != nil {
			return nil, toStatus(err)
		}
	}
	return reply, nil
}

// CreateEndpoint registers an endpoint; its signing secret is returned once.
// Without an endpoint_id the endpoint gets a new random id (ep_…); with
// one, its id is that name scoped to the tenant (see scopedEndpointID), so
// that no tenant can learn which names another uses.
func (s *Server) CreateEndpoint(ctx context.Context, req *controlv1.CreateEndpointRequest) (*controlv1.CreateEndpointResponse, error) {
	tenantID, c, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	req = cloneOf(req)
	if req.EndpointId == "" {
		req.EndpointId = newID("ep_")
	} else if err := checkEndpointName(req.EndpointId); err != nil {
		return nil, toStatus(err)
	} else {
		req.EndpointId = scopedEndpointID(tenantID, req.EndpointId)
	}
	if req.GetSettings() == nil {
		return nil, toStatus(invalid("settings", "is required: give at least url and event_types"))
	}
	if err := checkSettings(req.GetSettings()); err != nil {
		return nil, toStatus(err)
	}
	if c.Admin {
		if _, ok, err := s.cfg.Registry.Tenant(tenantID); err != nil {
			return nil, toStatus(err)
		} else if !ok {
			return nil, toStatus(invalid("tenant_id", "names no tenant; create it first with POST /v1/tenants"))
		}
	}
	if err := s.checkEndpointQuota(ctx, tenantID, c); err != nil {
		return nil, toStatus(err)
	}
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.EndpointId, true, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_Create{Create: req}
	})
	if err != nil {
		return nil, err
	}
	return &controlv1.CreateEndpointResponse{Endpoint: reply.GetEndpoint(), Secret: reply.GetSecret()}, nil
}

// checkEndpointQuota refuses a new endpoint of a tenant that has as many
// as its quota allows (quota.max_endpoints, as its grain holds it),
// deleted ones not counted. It counts the endpoints the registry has, at
// most the quota's number: creates that run at once may pass it by the
// calls in flight.
func (s *Server) checkEndpointQuota(ctx context.Context, tenantID string, c Caller) error {
	reply, err := s.askTenant(ctx, tenantID, &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{TenantId: tenantID}}})
	if err != nil {
		return err
	}
	quota := tenant.MaxEndpointsOf(reply.GetTenant().GetQuota())
	n, cursor := 0, ""
	for n < quota {
		eps, next, err := s.cfg.Registry.ListEndpoints(tenantID, cursor, 500)
		if err != nil {
			return err
		}
		n += len(eps)
		if cursor = next; cursor == "" {
			break
		}
	}
	if n >= quota {
		return status.Errorf(codes.FailedPrecondition,
			"tenant %s has %d endpoints, its quota.max_endpoints; delete endpoints it no longer uses, or have the operator raise quota.max_endpoints (PUT /v1/tenants/%s/quota)",
			tenantID, quota, tenantID)
	}
	return nil
}

// checkSettings applies the checks that need no grain to an endpoint's
// settings (create, or the fields of an update); the grain validates the
// rest.
func checkSettings(st *controlv1.EndpointSettings) error {
	if err := checkURLLength("settings.url", st.GetUrl()); err != nil {
		return err
	}
	for i, t := range st.GetEventTypes() {
		if err := eventtype.CheckEntry(t); err != nil {
			return invalid(fmt.Sprintf("settings.event_types[%d]", i), "%v", err)
		}
	}
	if src := st.GetFilter(); src != "" {
		if _, err := filter.Compile(src); err != nil {
			return invalid("settings.filter", "%v", err)
		}
	}
	return nil
}

// GetEndpoint returns an endpoint: from its grain, or with as_of as it
// was then, from the log (see endpointAsOf).
func (s *Server) GetEndpoint(ctx context.Context, req *controlv1.GetEndpointRequest) (*controlv1.Endpoint, error) {
	if req.GetAsOf() != "" {
		tenantID, _, err := tenantFor(ctx, req.GetTenantId())
		if err != nil {
			return nil, err
		}
		v, err := s.endpointAsOf(ctx, tenantID, req.GetEndpointId(), req.GetAsOf())
		return v, toStatus(err)
	}
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_Get{Get: req}
	})
	return reply.GetEndpoint(), err
}

// UpdateEndpoint changes the fields named by update_mask.
func (s *Server) UpdateEndpoint(ctx context.Context, req *controlv1.UpdateEndpointRequest) (*controlv1.Endpoint, error) {
	if req.GetSettings() == nil {
		return nil, toStatus(invalid("settings", "is required: give the fields to change"))
	}
	if len(req.GetUpdateMask().GetPaths()) == 0 {
		return nil, toStatus(invalid("update_mask", "is empty: name the fields to change (over REST, the fields present in the body)"))
	}
	if err := checkSettings(req.GetSettings()); err != nil {
		return nil, toStatus(err)
	}
	return s.changeEndpoint(ctx, req.GetTenantId(), req.GetEndpointId(), func(c *internalv1.EndpointCommand) { c.Command = &internalv1.EndpointCommand_Update{Update: req} })
}

// RotateSecret adds a new signing secret, returned once.
func (s *Server) RotateSecret(ctx context.Context, req *controlv1.RotateSecretRequest) (*controlv1.RotateSecretResponse, error) {
	if req.GetOverlapSeconds() < 0 || req.GetOverlapSeconds() > 7*24*3600 {
		return nil, toStatus(invalid("overlap_seconds", "is %d; give 0 (24 h) to 604800 (7 days)", req.GetOverlapSeconds()))
	}
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), true, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_Rotate{Rotate: req}
	})
	if err != nil {
		return nil, err
	}
	return &controlv1.RotateSecretResponse{Endpoint: reply.GetEndpoint(), Secret: reply.GetSecret()}, nil
}

// RetireSecret retires an old secret before its overlap ends.
func (s *Server) RetireSecret(ctx context.Context, req *controlv1.RetireSecretRequest) (*controlv1.Endpoint, error) {
	return s.changeEndpoint(ctx, req.GetTenantId(), req.GetEndpointId(), func(c *internalv1.EndpointCommand) { c.Command = &internalv1.EndpointCommand_Retire{Retire: req} })
}

// PauseEndpoint holds the endpoint's deliveries until it resumes.
func (s *Server) PauseEndpoint(ctx context.Context, req *controlv1.PauseEndpointRequest) (*controlv1.Endpoint, error) {
	return s.changeEndpoint(ctx, req.GetTenantId(), req.GetEndpointId(), func(c *internalv1.EndpointCommand) { c.Command = &internalv1.EndpointCommand_Pause{Pause: req} })
}

// ResumeEndpoint resumes a paused endpoint.
func (s *Server) ResumeEndpoint(ctx context.Context, req *controlv1.ResumeEndpointRequest) (*controlv1.Endpoint, error) {
	return s.changeEndpoint(ctx, req.GetTenantId(), req.GetEndpointId(), func(c *internalv1.EndpointCommand) { c.Command = &internalv1.EndpointCommand_Resume{Resume: req} })
}

// DeleteEndpoint deletes an endpoint: it is planned for no new event.
func (s *Server) DeleteEndpoint(ctx context.Context, req *controlv1.DeleteEndpointRequest) (*controlv1.Endpoint, error) {
	return s.changeEndpoint(ctx, req.GetTenantId(), req.GetEndpointId(), func(c *internalv1.EndpointCommand) { c.Command = &internalv1.EndpointCommand_Delete{Delete: req} })
}

// ListEndpoints lists the tenant's endpoints from the registry projection,
// in id order, with a cursor.
func (s *Server) ListEndpoints(ctx context.Context, req *controlv1.ListEndpointsRequest) (*controlv1.ListEndpointsResponse, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if err := checkPage("page_size", req.GetPageSize(), 500, 100); err != nil {
		return nil, toStatus(err)
	}
	eps, next, err := s.cfg.Registry.ListEndpoints(tenantID, req.GetCursor(), int(req.GetPageSize()))
	if errors.Is(err, registry.ErrBadCursor) {
		return nil, toStatus(invalid("cursor", "is not a cursor of this list; pass next_cursor from the previous page unchanged"))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	out := &controlv1.ListEndpointsResponse{NextCursor: next}
	for _, e := range eps {
		out.Endpoints = append(out.Endpoints, endpointView(e))
	}
	return out, nil
}

// endpointView is the view of an endpoint as the registry knows it: all
// but the secrets' dates and the public key, which only the grain holds.
func endpointView(e registry.Endpoint) *controlv1.Endpoint {
	c := e.Config
	v := &controlv1.Endpoint{
		EndpointId:    e.ID,
		TenantId:      e.TenantID,
		ConfigVersion: e.ConfigVersion,
		Status:        controlv1.Endpoint_STATUS_ACTIVE,
		Settings:      endpoint.SettingsOf(c),
		CreatedAt:     timestamppb.New(e.CreatedAt),
		UpdatedAt:     timestamppb.New(e.UpdatedAt),
	}
	switch {
	case e.Deleted:
		v.Status = controlv1.Endpoint_STATUS_DELETED
	case e.Disabled:
		v.Status = controlv1.Endpoint_STATUS_DISABLED
	case e.Paused:
		v.Status = controlv1.Endpoint_STATUS_PAUSED
	}
	for _, ver := range e.SecretVersions {
		v.Secrets = append(v.Secrets, &controlv1.SecretInfo{Version: ver})
	}
	return v
}
