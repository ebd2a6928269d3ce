package control

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The event catalog: a tenant's event types, each with a description, an
// example and a JSON Schema, versioned in the tenant's stream (the tenant
// grain decides, the registry keeps the newest version of each and its
// compiled schema); and, at publish, the check of a payload against its
// type's schema under the tenant's schema_enforcement.

// schemaCounts are the publishes whose payload did not match its type's
// schema, since the node started.
type schemaCounts struct {
	warned, rejected atomic.Int64
}

// SchemaViolations returns the publishes whose payload did not match its
// type's schema since the node started: accepted under warn, refused
// under reject.
func (s *Server) SchemaViolations() (warned, rejected int64) {
	return s.schemaCounts.warned.Load(), s.schemaCounts.rejected.Load()
}

// PutEventType defines an event type of the caller's catalog, or a new
// version of it, and answers once every member has applied it.
func (s *Server) PutEventType(ctx context.Context, req *controlv1.PutEventTypeRequest) (*controlv1.EventType, error) {
	tenantID, c, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if err := checkEventType("event_type", req.GetEventType()); err != nil {
		return nil, toStatus(err)
	}
	req = cloneOf(req)
	req.TenantId = tenantID
	if _, err := s.askTenant(ctx, tenantID, &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_PutEventType{PutEventType: req}}); err != nil {
		return nil, toStatus(err)
	}
	if err := s.settle(ctx); err != nil {
		return nil, toStatus(err)
	}
	t, ok, err := s.cfg.Registry.EventType(tenantID, req.GetEventType())
	if err != nil || !ok {
		return nil, toStatus(fmt.Errorf("read back event type %s: ok %v, %w", req.GetEventType(), ok, err))
	}
	return eventTypeView(t)
}

// ListEventTypes lists the caller's catalog and its schema enforcement.
func (s *Server) ListEventTypes(ctx context.Context, req *controlv1.ListEventTypesRequest) (*controlv1.ListEventTypesResponse, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if req.GetAsOf() != "" {
		out, err := s.eventTypesAsOf(ctx, tenantID, req.GetAsOf())
		return out, toStatus(err)
	}
	ts, err := s.cfg.Registry.EventTypes(tenantID)
	if err != nil {
		return nil, toStatus(err)
	}
	t, _, err := s.cfg.Registry.Tenant(tenantID)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &controlv1.ListEventTypesResponse{SchemaEnforcement: tenant.EnforcementName(t.SchemaEnforcement)}
	for _, et := range ts {
		v, err := eventTypeView(et)
		if err != nil {
			return nil, err
		}
		out.EventTypes = append(out.EventTypes, v)
	}
	return out, nil
}

// eventTypeView is the API's view of a catalog entry.
func eventTypeView(t registry.EventType) (*controlv1.EventType, error) {
	out := &controlv1.EventType{EventType: t.Type, Version: t.Version, Description: t.Description}
	if !t.DefinedAt.IsZero() {
		out.DefinedAt = timestamppb.New(t.DefinedAt)
	}
	for _, f := range []struct {
		text string
		dst  **structpb.Value
	}{{t.Example, &out.Example}, {t.Schema, &out.Schema}} {
		if f.text == "" {
			continue
		}
		v := &structpb.Value{}
		if err := protojson.Unmarshal([]byte(f.text), v); err != nil {
			return nil, toStatus(fmt.Errorf("decode the catalog's %s: %w", t.Type, err))
		}
		*f.dst = v
	}
	return out, nil
}

// UpdateTenant changes the caller's own settings.
func (s *Server) UpdateTenant(ctx context.Context, req *controlv1.UpdateTenantRequest) (*controlv1.Tenant, error) {
	tenantID, c, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	req = cloneOf(req)
	req.TenantId = tenantID
	for _, p := range req.GetUpdateMask().GetPaths() {
		if p != "retention" && p != "settings.retention" {
			continue
		}
		d, err := tenant.ParseRetention(req.GetSettings().GetRetention())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		switch {
		case d >= s.cfg.LogRetention:
			return nil, toStatus(invalid("settings.retention", "is %s; this node's log keeps %s, and a tenant's retention may only be shorter (\"\" for the node's)", d, s.cfg.LogRetention))
		case d > 0 && d <= s.cfg.DeliveryDeadline:
			return nil, toStatus(invalid("settings.retention", "is %s; it must outlast the delivery deadline (%s), or a delivery still retrying would lose its event", d, s.cfg.DeliveryDeadline))
		}
	}
	reply, err := s.askTenant(ctx, tenantID, &internalv1.TenantCommand{IssuedBy: c.Actor(), Command: &internalv1.TenantCommand_Update{Update: req}})
	if err != nil {
		return nil, toStatus(err)
	}
	return reply.GetTenant(), toStatus(s.settle(ctx))
}

// checkSchema checks a publish's payload against the schema of its type
// under the tenant's schema enforcement: off checks nothing; warn records
// a violation on the event (counted by publish once the event is new);
// reject refuses the publish naming the failing field and the rule.
func (s *Server) checkSchema(published *hooklinev1.EventPublished) error {
	t, ok, err := s.cfg.Registry.Tenant(published.GetTenantId())
	if err != nil || !ok || t.SchemaEnforcement == hooklinev1.SchemaEnforcement_SCHEMA_ENFORCEMENT_OFF {
		return err
	}
	sch, version, err := s.cfg.Registry.Schema(published.GetTenantId(), published.GetEventType())
	if err != nil || sch == nil {
		return err
	}
	v := sch.Validate(published.GetPayload())
	if v == nil {
		return nil
	}
	if t.SchemaEnforcement == hooklinev1.SchemaEnforcement_SCHEMA_ENFORCEMENT_REJECT {
		s.schemaCounts.rejected.Add(1)
		return invalid("payload", "does not match version %d of the schema of event type %q %v; fix the payload, or the schema (PUT /v1/event-types/%s)",
			version, published.GetEventType(), v, published.GetEventType())
	}
	published.SchemaViolation = &hooklinev1.SchemaViolation{
		SchemaVersion: version, Pointer: v.Pointer, Keyword: v.Keyword, Message: truncate(v.Message, maxFilterError),
	}
	return nil
}

// webhookHeaders are the headers every webhook carries, as the OpenAPI
// export describes them.
var webhookHeaders = []struct{ name, desc string }{
	{"webhook-id", "The delivery's id: the same on every retry and replay; drop repeats by it."},
	{"webhook-timestamp", "When the attempt was signed, in Unix seconds."},
	{"webhook-signature", "Standard Webhooks signatures (v1,<base64 HMAC-SHA256>), space-separated."},
	{"webhook-event-type", "The event type."},
}

// ExportEventTypes writes the caller's catalog as an OpenAPI 3.1 document
// of webhooks, or as its JSON Schemas by type.
func (s *Server) ExportEventTypes(ctx context.Context, req *controlv1.ExportEventTypesRequest) (*controlv1.ExportEventTypesResponse, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	format := req.GetFormat()
	if format == "" {
		format = "openapi"
	}
	if format != "openapi" && format != "jsonschema" {
		return nil, toStatus(invalid("format", "is %q; use openapi or jsonschema", format))
	}
	ts, err := s.cfg.Registry.EventTypes(tenantID)
	if err != nil {
		return nil, toStatus(err)
	}
	doc, err := exportDocument(tenantID, format, ts)
	if err != nil {
		return nil, toStatus(err)
	}
	out, err := structpb.NewStruct(doc)
	if err != nil {
		return nil, toStatus(fmt.Errorf("export: %w", err))
	}
	return &controlv1.ExportEventTypesResponse{Document: out}, nil
}

// exportDocument builds the export of a catalog.
func exportDocument(tenantID, format string, ts []registry.EventType) (map[string]any, error) {
	decode := func(text string) (any, error) {
		if text == "" {
			return nil, nil
		}
		var v any
		err := json.Unmarshal([]byte(text), &v)
		return v, err
	}
	schemas, webhooks := map[string]any{}, map[string]any{}
	versions := 0 // the document's version: any change of a type raises it
	for _, t := range ts {
		versions += int(t.Version)
		sch, err := decode(t.Schema)
		if err != nil {
			return nil, fmt.Errorf("the catalog's schema of %s: %w", t.Type, err)
		}
		example, err := decode(t.Example)
		if err != nil {
			return nil, fmt.Errorf("the catalog's example of %s: %w", t.Type, err)
		}
		if sch == nil {
			sch = map[string]any{} // any payload
		}
		schemas[t.Type] = sch
		media := map[string]any{"schema": sch}
		if example != nil {
			media["example"] = example
		}
		var params []any
		for _, h := range webhookHeaders {
			params = append(params, map[string]any{"name": h.name, "in": "header", "required": true, "description": h.desc, "schema": map[string]any{"type": "string"}})
		}
		webhooks[t.Type] = map[string]any{"post": map[string]any{
			"operationId": t.Type, "summary": t.Description,
			"description": fmt.Sprintf("Event type %s, version %d of its definition.", t.Type, t.Version),
			"parameters":  params,
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": media}},
			"responses":   map[string]any{"2XX": map[string]any{"description": "Received. Any other answer is retried."}},
		}}
	}
	if format == "jsonschema" {
		return map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": schemas}, nil
	}
	return map[string]any{
		"openapi":  "3.1.0",
		"info":     map[string]any{"title": "Webhooks of " + tenantID, "version": fmt.Sprint(versions)},
		"webhooks": webhooks,
	}, nil
}

// catalogAt folds the tenant's stream up to m: the catalog, the setting,
// the last record read and how many.
func (s *Server) catalogAt(ctx context.Context, tenantID string, m moment) (*tenant.State, *events.Record, int64, error) {
	var st tenant.State
	last, n, err := s.foldStream(ctx, events.TenantStream(tenantID), m, func(_ *events.Record, msg proto.Message) { st.Apply(msg) })
	return &st, last, n, err
}

// schemaAt says what the catalog held for a published event's type when
// it was published (at its position); nil when the type had no schema.
func (s *Server) schemaAt(ctx context.Context, pub *hooklinev1.EventPublished, at events.Position) (*controlv1.RoutingSchema, error) {
	st, _, _, err := s.catalogAt(ctx, pub.GetTenantId(), moment{pos: at, byPos: true})
	if err != nil {
		return nil, err
	}
	def := st.EventTypes[pub.GetEventType()]
	if def.GetSchema() == "" {
		return nil, nil
	}
	return &controlv1.RoutingSchema{
		SchemaVersion: def.GetVersion(), Enforcement: tenant.EnforcementName(st.SchemaEnforcement),
		Violation: pub.GetSchemaViolation(),
	}, nil
}

// eventTypesAsOf is ListEventTypes as of a time or a log position.
func (s *Server) eventTypesAsOf(ctx context.Context, tenantID, asOf string) (*controlv1.ListEventTypesResponse, error) {
	m, err := parseMoment("as_of", asOf)
	if err != nil {
		return nil, err
	}
	st, last, n, err := s.catalogAt(ctx, tenantID, m)
	if err != nil {
		return nil, err
	}
	if last == nil || !st.Created {
		return nil, status.Errorf(codes.NotFound, "tenant_id %q did not exist at %s", tenantID, asOf)
	}
	out := &controlv1.ListEventTypesResponse{SchemaEnforcement: tenant.EnforcementName(st.SchemaEnforcement), AsOf: asOfView(last, n)}
	for _, typ := range slices.Sorted(maps.Keys(st.EventTypes)) {
		d := st.EventTypes[typ]
		v, err := eventTypeView(registry.EventType{Type: typ, Version: d.GetVersion(), Description: d.GetDescription(),
			Example: d.GetExample(), Schema: d.GetSchema(), DefinedAt: d.GetAt().AsTime()})
		if err != nil {
			return nil, err
		}
		out.EventTypes = append(out.EventTypes, v)
	}
	return out, nil
}
