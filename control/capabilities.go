package control

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/projections/portal"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// portalMethods is the one table of what a portal token may call: each RPC
// and the capability it needs. An RPC that is not listed is refused to
// every portal token (publishing, tenants and keys, portal tokens
// themselves, the operator's views): a portal acts on its tenant's
// endpoints and deliveries, never beyond, and never sees an API key.
var portalMethods = map[string]string{
	controlv1.PortalService_GetSession_FullMethodName: portal.Read,

	controlv1.EndpointService_ListEndpoints_FullMethodName:           portal.Read,
	controlv1.EndpointService_GetEndpoint_FullMethodName:             portal.Read,
	controlv1.EndpointService_GetRecovery_FullMethodName:             portal.Read,
	controlv1.EndpointService_ListOrderingKeys_FullMethodName:        portal.Read,
	controlv1.EndpointHealthService_GetEndpointHealth_FullMethodName: portal.Read,
	controlv1.DeliveryService_ListDeliveries_FullMethodName:          portal.Read,
	controlv1.DeliveryService_GetDelivery_FullMethodName:             portal.Read,
	controlv1.EventService_ExplainRouting_FullMethodName:             portal.Read,
	controlv1.EventService_ListOperationalEventTypes_FullMethodName:  portal.Read,
	controlv1.EventTypeService_ListEventTypes_FullMethodName:         portal.Read,
	controlv1.EventTypeService_ExportEventTypes_FullMethodName:       portal.Read,
	controlv1.EndpointService_CreateEndpoint_FullMethodName:          portal.ManageEndpoints,
	controlv1.EndpointService_UpdateEndpoint_FullMethodName:          portal.ManageEndpoints,
	controlv1.EndpointService_RotateSecret_FullMethodName:            portal.ManageEndpoints,
	controlv1.EndpointService_RetireSecret_FullMethodName:            portal.ManageEndpoints,
	controlv1.EndpointService_PauseEndpoint_FullMethodName:           portal.ManageEndpoints,
	controlv1.EndpointService_ResumeEndpoint_FullMethodName:          portal.ManageEndpoints,
	controlv1.EndpointService_DeleteEndpoint_FullMethodName:          portal.ManageEndpoints,
	controlv1.DeliveryService_ReplayDelivery_FullMethodName:          portal.Replay,
	controlv1.EndpointService_RecoverEndpoint_FullMethodName:         portal.Replay,
	controlv1.EndpointService_SkipOrderingKey_FullMethodName:         portal.Replay,
}

// pullMethods are what a pull token (a portal token with an endpoint) may
// call, on its endpoint only.
var pullMethods = []string{
	controlv1.EndpointService_PullDeliveries_FullMethodName,
	controlv1.EndpointService_AckDeliveries_FullMethodName,
	controlv1.EndpointService_SeekDeliveries_FullMethodName,
}

// pullScope refuses a pull token's call on another endpoint than its own.
func pullScope(ctx context.Context, endpointID string) error {
	if c, ok := CallerFrom(ctx); ok && c.Portal != nil && c.Portal.EndpointID != "" && c.Portal.EndpointID != endpointID {
		return status.Errorf(codes.PermissionDenied, "this pull token pulls endpoint %s only", c.Portal.EndpointID)
	}
	return nil
}

// allow refuses a call that the caller's portal token does not permit.
// Admin and API-key callers pass: their limits are checked by each RPC.
func allow(c Caller, method string) error {
	if c.Portal == nil {
		return nil
	}
	if c.Portal.EndpointID != "" {
		if !slices.Contains(pullMethods, method) {
			return status.Error(codes.PermissionDenied, "a pull token can only pull, acknowledge and seek its endpoint's deliveries")
		}
		return nil // the handler checks the endpoint (pullScope)
	}
	need, ok := portalMethods[method]
	if !ok {
		return status.Error(codes.PermissionDenied, "a portal token cannot make this call; use the tenant's API key")
	}
	if !c.Portal.Has(need) {
		return status.Errorf(codes.PermissionDenied, "this portal token lacks the %q capability", need)
	}
	return nil
}
