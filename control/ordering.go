package control

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// ListOrderingKeys lists an ordered endpoint's keys that have a head
// delivery, from the due index of the endpoint's partition owner.
func (s *Server) ListOrderingKeys(ctx context.Context, req *controlv1.ListOrderingKeysRequest) (*controlv1.ListOrderingKeysResponse, error) {
	if err := checkPage("page_size", req.GetPageSize(), endpoint.MaxKeysPage, endpoint.DefaultKeysPage); err != nil {
		return nil, toStatus(err)
	}
	r := proto.CloneOf(req)
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_ListOrderingKeys{ListOrderingKeys: r}
	})
	if err != nil {
		return nil, err
	}
	return &controlv1.ListOrderingKeysResponse{Keys: reply.GetOrderingKeys()}, nil
}

// SkipOrderingKey ends a key's head delivery so that the key's next one
// goes; the endpoint's grain records it with who asked.
func (s *Server) SkipOrderingKey(ctx context.Context, req *controlv1.SkipOrderingKeyRequest) (*controlv1.OrderingKey, error) {
	r := proto.CloneOf(req)
	reply, err := s.endpointCommand(ctx, req.GetTenantId(), req.GetEndpointId(), false, func(c *internalv1.EndpointCommand) {
		c.Command = &internalv1.EndpointCommand_SkipOrderingKey{SkipOrderingKey: r}
	})
	return reply.GetOrderingKey(), err
}
