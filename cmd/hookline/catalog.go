package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// jsonValue reads a JSON flag (JSON, @FILE or - for stdin) into a Value;
// nil when the flag is empty.
func jsonValue(flagName, arg string) (*structpb.Value, error) {
	if arg == "" {
		return nil, nil
	}
	b, err := readData(arg)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	v := &structpb.Value{}
	if err := protojson.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("--%s is not JSON: %v", flagName, err)
	}
	return v, nil
}

func eventTypesPut(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (with the admin token)")
	typ := fs.String("type", "", "the event type, e.g. order.paid")
	desc := fs.String("description", "", "what the event means, shown to customers")
	example := fs.String("example", "", "an example payload: JSON, @FILE or - for stdin")
	schema := fs.String("schema", "", "a JSON Schema (draft 2020-12) of the payloads: JSON, @FILE or - for stdin")
	return func(ctx context.Context, c *conn) error {
		if *typ == "" {
			return errors.New("event-types put: --type is missing; name the event type, e.g. --type order.paid")
		}
		req := &controlv1.PutEventTypeRequest{TenantId: *tenant, EventType: *typ, Description: *desc}
		var err error
		if req.Example, err = jsonValue("example", *example); err != nil {
			return err
		}
		if req.Schema, err = jsonValue("schema", *schema); err != nil {
			return err
		}
		return show(ctx, c, c.PutEventType, req, printEventType)
	}
}

func printEventType(w io.Writer, t *controlv1.EventType) {
	fmt.Fprintf(w, "%-32s version %d  %s\n", t.GetEventType(), t.GetVersion(), t.GetDescription())
	if s := t.GetSchema(); s != nil {
		fmt.Fprintf(w, "  schema   %s\n", compactValue(s))
	}
	if e := t.GetExample(); e != nil {
		fmt.Fprintf(w, "  example  %s\n", compactValue(e))
	}
}

// compactValue is v as compact JSON (protojson's own spacing is unstable
// on purpose).
func compactValue(v *structpb.Value) []byte {
	b, _ := protojson.Marshal(v)
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

func eventTypesList(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (with the admin token)")
	asOf := fs.String("as-of", "", "the catalog as it was then: an RFC 3339 time or a log position, read from the log")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.ListEventTypes, &controlv1.ListEventTypesRequest{TenantId: *tenant, AsOf: *asOf}, func(w io.Writer, r *controlv1.ListEventTypesResponse) {
			if a := r.GetAsOf(); a != nil {
				fmt.Fprintf(w, "as of position %s, recorded %s\n", a.GetPosition(), fmtTime(a.GetRecordedAt()))
			}
			fmt.Fprintf(w, "schema enforcement: %s\n", r.GetSchemaEnforcement())
			if len(r.GetEventTypes()) == 0 {
				fmt.Fprintln(w, "no event types (hookline event-types put --type … --schema @schema.json)")
			}
			for _, t := range r.GetEventTypes() {
				printEventType(w, t)
			}
		})
	}
}

func tenantsUpdate(fs *flag.FlagSet) func(context.Context, *conn) error {
	id := fs.String("id", "", "tenant id (a tenant key's own when empty)")
	enforcement := fs.String("schema-enforcement", "", "off, warn or reject: what a publish whose payload breaks its type's schema gets")
	retention := fs.String("retention", "", "how long the tenant's events and deliveries are kept, shorter than the node's, e.g. 168h; \"\" for the node's")
	return func(ctx context.Context, c *conn) error {
		req := &controlv1.UpdateTenantRequest{TenantId: *id, Settings: &controlv1.TenantSettings{}, UpdateMask: &fieldmaskpb.FieldMask{}}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "schema-enforcement":
				req.Settings.SchemaEnforcement = strings.TrimSpace(*enforcement)
				req.UpdateMask.Paths = append(req.UpdateMask.Paths, "schema_enforcement")
			case "retention":
				req.Settings.Retention = strings.TrimSpace(*retention)
				req.UpdateMask.Paths = append(req.UpdateMask.Paths, "retention")
			}
		})
		if len(req.UpdateMask.Paths) == 0 {
			return errors.New("tenants update: nothing to change; give --schema-enforcement off|warn|reject or --retention DURATION")
		}
		return show(ctx, c, c.UpdateTenant, req, printTenant)
	}
}

func eventTypesExport(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (with the admin token)")
	format := fs.String("format", "openapi", "openapi (an OpenAPI 3.1 document of the webhooks) or jsonschema (the schemas by type)")
	return func(ctx context.Context, c *conn) error {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		r, err := c.ExportEventTypes(ctx, &controlv1.ExportEventTypesRequest{TenantId: *tenant, Format: *format})
		if err != nil {
			return err
		}
		b, err := protojson.Marshal(r.GetDocument())
		if err != nil {
			return err
		}
		var out bytes.Buffer // protojson's spacing is unstable on purpose: a stable document
		if err := json.Indent(&out, b, "", "  "); err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.out, "%s\n", out.Bytes())
		return err
	}
}
