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
