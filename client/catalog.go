package client

import (
	"context"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// PutEventType defines an event type of the tenant's catalog, or a new
// version of it (a description, an example payload, a JSON Schema); the
// same definition again changes nothing. Retried.
func (c *Client) PutEventType(ctx context.Context, req *controlv1.PutEventTypeRequest) (*controlv1.EventType, error) {
	return call(ctx, c, "put event type", idempotent, req, c.eventTypes.PutEventType)
}

// ListEventTypes lists the tenant's catalog, the newest version of each
// type, and its schema enforcement. Retried.
func (c *Client) ListEventTypes(ctx context.Context, req *controlv1.ListEventTypesRequest) (*controlv1.ListEventTypesResponse, error) {
	return call(ctx, c, "list event types", idempotent, req, c.eventTypes.ListEventTypes)
}

// UpdateTenant changes the tenant's own settings named by the mask
// (schema_enforcement). Retried.
func (c *Client) UpdateTenant(ctx context.Context, req *controlv1.UpdateTenantRequest) (*controlv1.Tenant, error) {
	return call(ctx, c, "update tenant", idempotent, req, c.tenants.UpdateTenant)
}

// ExportEventTypes writes the tenant's catalog as an OpenAPI 3.1 document
// of its webhooks (format "openapi") or its JSON Schemas by type
// ("jsonschema"). Retried.
func (c *Client) ExportEventTypes(ctx context.Context, req *controlv1.ExportEventTypesRequest) (*controlv1.ExportEventTypesResponse, error) {
	return call(ctx, c, "export event types", idempotent, req, c.eventTypes.ExportEventTypes)
}

// EraseTenant crypto-shreds the tenant's payloads and stored response
// bodies (admin token; confirm repeats the tenant id). Sent once, never
// retried: a retry after an erasure that went through would erase the
// payloads published since.
func (c *Client) EraseTenant(ctx context.Context, tenantID string) (*controlv1.EraseTenantResponse, error) {
	req := &controlv1.EraseTenantRequest{TenantId: tenantID, Confirm: tenantID}
	return call(ctx, c, "erase tenant", once, req, c.tenants.EraseTenant)
}

// GetEvent returns one published event with its payload; an erased payload
// fails with an *Error whose Code is codes.NotFound and Erased is true.
// Retried (it only reads).
func (c *Client) GetEvent(ctx context.Context, req *controlv1.GetEventRequest) (*controlv1.Event, error) {
	return call(ctx, c, "get event", idempotent, req, c.events.GetEvent)
}
