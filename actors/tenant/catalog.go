package tenant

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/schema"
)

// Limits of the catalog.
const (
	MaxEventTypes         = 1000
	MaxTypeDescriptionLen = 2000
)

// Words of the schema_enforcement setting.
var enforcementNames = map[hooklinev1.SchemaEnforcement]string{
	hooklinev1.SchemaEnforcement_SCHEMA_ENFORCEMENT_OFF:    "off",
	hooklinev1.SchemaEnforcement_SCHEMA_ENFORCEMENT_WARN:   "warn",
	hooklinev1.SchemaEnforcement_SCHEMA_ENFORCEMENT_REJECT: "reject",
}

// EnforcementName is the word of a schema enforcement setting.
func EnforcementName(e hooklinev1.SchemaEnforcement) string { return enforcementNames[e] }

// ParseEnforcement reads a schema_enforcement word.
func ParseEnforcement(s string) (hooklinev1.SchemaEnforcement, bool) {
	for e, name := range enforcementNames {
		if name == s {
			return e, true
		}
	}
	return 0, false
}

// compactJSON is the compact JSON text of v, "" for none.
func compactJSON(field string, v *structpb.Value) (string, error) {
	if v == nil {
		return "", nil
	}
	raw, err := protojson.Marshal(v)
	if err != nil {
		return "", command.Invalid(field, "is not a JSON value: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", command.Invalid(field, "is not a JSON value: %v", err)
	}
	return buf.String(), nil
}

// decidePutEventType defines a type, or a new version of it when anything
// differs from its newest version. The schema must compile and the
// example match it.
func (s *State) decidePutEventType(identity string, r *controlv1.PutEventTypeRequest, by *hooklinev1.Actor, at *timestamppb.Timestamp, rid string) (Decision, error) {
	typ := r.GetEventType()
	if typ == "" {
		return Decision{}, command.Invalid("event_type", "is required: name the event type, e.g. order.paid")
	}
	if len(r.GetDescription()) > MaxTypeDescriptionLen || !utf8.ValidString(r.GetDescription()) {
		return Decision{}, command.Invalid("description", "must be UTF-8 of at most %d bytes", MaxTypeDescriptionLen)
	}
	example, err := compactJSON("example", r.GetExample())
	if err != nil {
		return Decision{}, err
	}
	doc, err := compactJSON("schema", r.GetSchema())
	if err != nil {
		return Decision{}, err
	}
	if len(example) > schema.MaxExampleBytes {
		return Decision{}, command.Invalid("example", "is %d bytes; use at most %d", len(example), schema.MaxExampleBytes)
	}
	if doc != "" {
		compiled, err := schema.Compile([]byte(doc))
		if err != nil {
			return Decision{}, command.Invalid("schema", "%v", err)
		}
		if example != "" {
			if v := compiled.Validate([]byte(example)); v != nil {
				return Decision{}, command.Invalid("example", "does not match the schema %v; fix one of them", v)
			}
		}
	}
	prev := s.EventTypes[typ]
	if prev == nil && len(s.EventTypes) >= MaxEventTypes {
		return Decision{}, command.FailedPrecondition("event_type", "tenant %s has %d event types, the most a catalog holds", identity, len(s.EventTypes))
	}
	next := &hooklinev1.EventTypeDefined{
		TenantId: identity, EventType: typ, Version: prev.GetVersion() + 1,
		Description: r.GetDescription(), Example: example, Schema: doc,
		IssuedBy: by, At: at, RequestId: rid,
	}
	if prev != nil && prev.GetDescription() == next.Description && prev.GetExample() == next.Example && prev.GetSchema() == next.Schema {
		return Decision{}, nil // the same definition: nothing to write
	}
	return Decision{Events: []proto.Message{next}}, nil
}

// MinRetention is the shortest retention a tenant may set.
const MinRetention = time.Minute

// ParseRetention reads a tenant's retention setting: a Go duration, ""
// or 0 for the log's.
func ParseRetention(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, command.Invalid("settings.retention", "is %q, not a duration; give one such as 168h (7 days), or \"\" for the node's", s)
	case d < 0 || d > 0 && d < MinRetention:
		return 0, command.Invalid("settings.retention", "is %s; give at least %s, or \"\" for the node's", d, MinRetention)
	}
	return d, nil
}

// decideUpdate changes the tenant's own settings named by the mask.
func (s *State) decideUpdate(identity string, r *controlv1.UpdateTenantRequest, by *hooklinev1.Actor, at *timestamppb.Timestamp, rid string) (Decision, error) {
	paths := r.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return Decision{}, command.Invalid("update_mask", "is empty: name the settings to change (over REST, the fields present in the body)")
	}
	enforcement, retention := s.SchemaEnforcement, s.Retention
	for _, p := range paths {
		switch p {
		case "schema_enforcement", "settings.schema_enforcement":
			e, ok := ParseEnforcement(r.GetSettings().GetSchemaEnforcement())
			if !ok {
				return Decision{}, command.Invalid("settings.schema_enforcement", "is %q; use off, warn or reject", r.GetSettings().GetSchemaEnforcement())
			}
			enforcement = e
		case "retention", "settings.retention":
			d, err := ParseRetention(r.GetSettings().GetRetention())
			if err != nil {
				return Decision{}, err
			}
			retention = d
		default:
			return Decision{}, command.Invalid("update_mask", "names %q; a tenant sets schema_enforcement and retention", p)
		}
	}
	if enforcement == s.SchemaEnforcement && retention == s.Retention {
		return Decision{}, nil
	}
	return Decision{Events: []proto.Message{&hooklinev1.TenantSettingsChanged{
		TenantId: identity, SchemaEnforcement: enforcement, RetentionSeconds: int64(retention / time.Second),
		IssuedBy: by, At: at, RequestId: rid,
	}}}, nil
}
