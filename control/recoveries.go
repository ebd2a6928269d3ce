package control

import (
	"context"

	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// ListRecoveries lists the endpoint's recent bulk recoveries, newest first:
// the one running, if any, and the last ones finished, each with its
// progress. The endpoint grain keeps them on its stream, so they survive
// its restarts.
func (s *Server) ListRecoveries(ctx context.Context, req *controlv1.ListRecoveriesRequest) (*controlv1.ListRecoveriesResponse, error) {
	r := &controlv1.ListRecoveriesRequest{TenantId: req.GetTenantId(), EndpointId: req.GetEndpointId()}
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_ListRecoveries{ListRecoveries: r}
	})
	if err != nil {
		return nil, err
	}
	return &controlv1.ListRecoveriesResponse{Recoveries: reply.GetRecoveries()}, nil
}
