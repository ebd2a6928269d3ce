package main

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/client"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// show makes one call under --timeout and prints its answer: as JSON with
// --json, else with readable.
func show[Req any, M proto.Message](ctx context.Context, c *conn, call func(context.Context, Req) (M, error), req Req, readable func(io.Writer, M)) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	m, err := call(ctx, req)
	if err != nil {
		return err
	}
	return c.print(m, func(w io.Writer) { readable(w, m) })
}

// quietFlag declares --quiet and its short form -q, for a command that
// shows a secret once: it prints only what, for a shell's $(…).
func quietFlag(fs *flag.FlagSet, what string) *bool {
	q := new(bool)
	fs.BoolVar(q, "quiet", false, "print only "+what+", e.g. for $(…)")
	fs.BoolVar(q, "q", false, "short for --quiet")
	return q
}

// errQuietJSON refuses --quiet with --json.
var errQuietJSON = errors.New("--quiet prints the secret alone and --json the whole answer: give one of them")

// print writes a message as JSON (--json) or as readable lines.
func (c *conn) print(m proto.Message, readable func(w io.Writer)) error {
	if c.json {
		b, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true}.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.out, string(b))
		return err
	}
	readable(c.out)
	return nil
}

func tenantsCreate(fs *flag.FlagSet) func(context.Context, *conn) error {
	id := fs.String("id", "", "tenant id (generated when empty)")
	name := fs.String("name", "", "tenant name")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.CreateTenant, &controlv1.CreateTenantRequest{TenantId: *id, Name: *name}, printTenant)
	}
}

func tenantsGet(fs *flag.FlagSet) func(context.Context, *conn) error {
	id := fs.String("id", "", "tenant id (a tenant key's own when empty)")
	asOf := fs.String("as-of", "", "the tenant (quota, keys) as it was then: an RFC 3339 time or a log position, read from the log")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.GetTenant, &controlv1.GetTenantRequest{TenantId: *id, AsOf: *asOf}, printTenant)
	}
}

func printTenant(w io.Writer, t *controlv1.Tenant) {
	fmt.Fprintf(w, "tenant   %s\nname     %s\ncreated  %s\n", t.GetTenantId(), t.GetName(), fmtTime(t.GetCreatedAt()))
	if a := t.GetAsOf(); a != nil {
		fmt.Fprintf(w, "as of    position %s, recorded %s (%d events)\n", a.GetPosition(), fmtTime(a.GetRecordedAt()), a.GetEvents())
	}
	fmt.Fprintf(w, "quota    %s\n", quotaText(t.GetQuota()))
	if s := t.GetSettings(); s != nil {
		fmt.Fprintf(w, "schemas  %s (schema enforcement)\n", s.GetSchemaEnforcement())
		if r := s.GetRetention(); r != "" {
			fmt.Fprintf(w, "kept     %s (its own retention)\n", r)
		}
	}
	if e := t.GetErasedAt(); e != nil {
		fmt.Fprintf(w, "erased   %s (payloads published before are unreadable)\n", fmtTime(e))
	}
	if len(t.GetApiKeys()) == 0 {
		fmt.Fprintf(w, "keys     none (hookline keys issue --tenant %s)\n", t.GetTenantId())
	}
	for _, k := range t.GetApiKeys() {
		state := "live"
		if k.GetRevoked() {
			state = "revoked"
		}
		fmt.Fprintf(w, "key      %s  %-8s %s\n", k.GetKeyId(), state, k.GetName())
	}
}

// quotaText says a tenant's quota, a limit it leaves 0 as the node's
// default (never "0 attempts/s").
func quotaText(q *hooklinev1.Quota) string {
	if q.GetAttemptsPerSecond() == 0 && q.GetMaxInFlight() == 0 && q.GetWeight() == 0 && q.GetMaxEndpoints() == 0 {
		return "none of its own: the node's defaults (--tenant-default-rate, --tenant-default-in-flight), weight 1, up to 1000 endpoints"
	}
	parts := []string{"the node's default rate", "the node's default in flight", "weight 1", "up to 1000 endpoints"}
	if r := q.GetAttemptsPerSecond(); r > 0 {
		parts[0] = fmt.Sprintf("%g attempts/s", r)
	}
	if n := q.GetMaxInFlight(); n > 0 {
		parts[1] = fmt.Sprintf("%d in flight", n)
	}
	if n := q.GetWeight(); n > 0 {
		parts[2] = fmt.Sprintf("weight %d", n)
	}
	if n := q.GetMaxEndpoints(); n > 0 {
		parts[3] = fmt.Sprintf("up to %d endpoints", n)
	}
	return strings.Join(parts, ", ")
}

func keysIssue(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id")
	name := fs.String("name", "", "a label for the key")
	quiet := quietFlag(fs, "the API key")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.IssueAPIKey, &controlv1.IssueApiKeyRequest{TenantId: *tenant, Name: *name}, func(w io.Writer, k *controlv1.IssueApiKeyResponse) {
			if *quiet {
				fmt.Fprintln(w, k.GetApiKey())
				return
			}
			fmt.Fprintf(w, "tenant   %s\nkey id   %s\napi key  %s\n(the key is shown only now: store it safely)\n", k.GetTenantId(), k.GetKeyId(), k.GetApiKey())
		})
	}
}

func keysRevoke(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id")
	key := fs.String("key-id", "", "key id")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.RevokeAPIKey, &controlv1.RevokeApiKeyRequest{TenantId: *tenant, KeyId: *key}, printTenant)
	}
}

// settingsFlags declares the endpoint settings flags and returns the
// settings built from them, with the paths of the flags actually given.
func settingsFlags(fs *flag.FlagSet) func() (*controlv1.EndpointSettings, []string) {
	s := &controlv1.EndpointSettings{}
	url := fs.String("url", "", "https URL to deliver to")
	types := fs.String("types", "", "comma-separated event types, or * for all")
	desc := fs.String("description", "", "description")
	rate := fs.Float64("rate", 0, "attempts per second (0: default)")
	inflight := fs.Int("max-in-flight", 0, "concurrent attempts (0: default)")
	timeout := fs.Duration("attempt-timeout", 0, "timeout of one attempt (0: 15s, at most 30s)")
	ed := fs.Bool("ed25519", false, "also sign with ed25519 (v1a)")
	filt := fs.String("filter", "", "a CEL filter over the event, e.g. 'data.amount >= 1000' (\"\" removes it; see the README)")
	ordering := fs.String("ordering", "", "\"key\": one delivery of an ordering key at a time, in order; \"none\": unordered (the default)")
	delivery := fs.String("delivery", "", "\"pull\": no --url, a consumer pulls the deliveries (hookline endpoints pull); \"push\": the default")
	keyFailure := fs.String("key-failure", "", "with --ordering key: \"continue\" (a failed delivery lets the key's next go, the default) or \"park\"")
	fs.Func("header", "a static header sent with every attempt, \"Name: value\" (repeat it; on update, the headers given replace all)", endpointHeader(&s.Headers))
	fs.Func("secret-header", "like --header, but the value is sealed at rest and never shown (an API key, an Authorization header)", endpointHeader(&s.SecretHeaders))
	clearHeaders := fs.Bool("clear-headers", false, "on update: remove every static header, plain and secret")
	auth := &controlv1.OAuth2Auth{}
	fs.StringVar(&auth.TokenUrl, "oauth2-token-url", "", "OAuth2 client credentials: the receiver's token endpoint (with --oauth2-client-id and --oauth2-client-secret; on update give them all)")
	fs.StringVar(&auth.ClientId, "oauth2-client-id", "", "OAuth2 client id")
	fs.StringVar(&auth.ClientSecret, "oauth2-client-secret", "", "OAuth2 client secret, sealed at rest (on update, empty keeps the current one)")
	scopes := fs.String("oauth2-scopes", "", "comma-separated OAuth2 scopes")
	fs.StringVar(&auth.Audience, "oauth2-audience", "", "OAuth2 audience parameter, when the token endpoint wants one")
	mtls := &controlv1.MTLSAuth{}
	fs.Func("mtls-cert", "mutual TLS: a PEM file of the client certificate chain presented to the receiver (with --mtls-key; on update give --mtls-cert again)", pemFile(&mtls.ClientCertificate))
	fs.Func("mtls-key", "mutual TLS: a PEM file of the client certificate's private key, sealed at rest (on update, leaving it out keeps the current one for the same certificate)", pemFile(&mtls.ClientKey))
	fs.Func("mtls-ca", "mutual TLS: a PEM file of the CA certificates the receiver's certificate chains to, in place of the system's roots", pemFile(&mtls.CaBundle))
	clearAuth := fs.Bool("clear-auth", false, "on update: remove the OAuth2 grant and the client certificate")
	prefix := fs.String("header-prefix", "", "names of the signature headers: \"webhook-\" (the default) or another prefix, e.g. \"svix-\"")
	return func() (*controlv1.EndpointSettings, []string) {
		var paths []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "url":
				s.Url, paths = *url, append(paths, "url")
			case "types":
				s.EventTypes, paths = splitList(*types), append(paths, "event_types")
			case "description":
				s.Description, paths = *desc, append(paths, "description")
			case "rate":
				s.RatePerSecond, paths = *rate, append(paths, "rate_per_second")
			case "max-in-flight":
				s.MaxInFlight, paths = int32(*inflight), append(paths, "max_in_flight")
			case "attempt-timeout":
				s.TimeoutMs, paths = int32(timeout.Milliseconds()), append(paths, "timeout_ms")
			case "ed25519":
				s.SignEd25519, paths = *ed, append(paths, "sign_ed25519")
			case "filter":
				s.Filter, paths = *filt, append(paths, "filter")
			case "ordering":
				s.Ordering, paths = *ordering, append(paths, "ordering")
			case "key-failure":
				s.KeyFailure, paths = *keyFailure, append(paths, "key_failure")
			case "delivery":
				s.Delivery, paths = *delivery, append(paths, "delivery")
			case "header-prefix":
				s.HeaderPrefix, paths = *prefix, append(paths, "header_prefix")
			case "header":
				paths = append(paths, "headers")
			case "secret-header":
				paths = append(paths, "secret_headers")
			case "oauth2-token-url", "oauth2-client-id", "oauth2-client-secret", "oauth2-scopes", "oauth2-audience":
				auth.Scopes = splitList(*scopes)
				s.Auth = cmp.Or(s.Auth, &controlv1.EndpointAuth{})
				s.Auth.Oauth2, paths = auth, append(paths, "auth.oauth2")
			case "mtls-cert", "mtls-key", "mtls-ca":
				s.Auth = cmp.Or(s.Auth, &controlv1.EndpointAuth{})
				s.Auth.Mtls, paths = mtls, append(paths, "auth.mtls")
			case "clear-auth":
				if *clearAuth {
					s.Auth, paths = nil, append(paths, "auth")
				}
			case "clear-headers":
				if *clearHeaders {
					s.Headers, s.SecretHeaders, paths = nil, nil, append(paths, "headers", "secret_headers")
				}
			}
		})
		return s, paths
	}
}

// pemFile reads a flag's PEM file into *dst.
func pemFile(dst *string) func(string) error {
	return func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		*dst = string(b)
		return nil
	}
}

// endpointHeader parses one --header "Name: value" of an endpoint into *m.
func endpointHeader(m *map[string]string) func(string) error {
	return func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("%q is not \"Name: value\"", v)
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[strings.TrimSpace(name)] = strings.TrimSpace(value)
		return nil
	}
}

func endpointsCreate(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "endpoint id (generated when empty)")
	settings := settingsFlags(fs)
	quiet := quietFlag(fs, "the endpoint's signing secret")
	printID := fs.Bool("print-id", false, "print only the endpoint's id, e.g. for EP=$(…) (then its secret is not shown: rotate-secret shows a new one)")
	return func(ctx context.Context, c *conn) error {
		if *printID && (*quiet || c.json) {
			return errors.New("endpoints create: --print-id prints the id alone; give it without --quiet and --json")
		}
		s, _ := settings()
		req := &controlv1.CreateEndpointRequest{TenantId: *tenant, EndpointId: *id, Settings: s}
		return show(ctx, c, c.CreateEndpoint, req, func(w io.Writer, r *controlv1.CreateEndpointResponse) {
			if *printID {
				fmt.Fprintln(w, r.GetEndpoint().GetEndpointId())
				return
			}
			printNewSecret(w, *quiet, r.GetEndpoint(), r.GetSecret())
		})
	}
}

// printNewSecret prints an endpoint and the secret it shows once, or with
// --quiet the secret alone.
func printNewSecret(w io.Writer, quiet bool, e *controlv1.Endpoint, secret string) {
	if quiet {
		fmt.Fprintln(w, secret)
		return
	}
	printEndpoint(w, e)
	fmt.Fprintf(w, "secret       %s\n(the secret is shown only now: give it to the receiver)\n", secret)
}

func endpointsGet(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	asOf := fs.String("as-of", "", "the endpoint as it was then: an RFC 3339 time or a log position, read from the log")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.GetEndpoint, &controlv1.GetEndpointRequest{TenantId: *tenant, EndpointId: *id, AsOf: *asOf}, printEndpoint)
	}
}

func endpointsList(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	size := fs.Int("limit", 50, "page size")
	cursor := fs.String("cursor", "", "cursor from the previous page")
	return func(ctx context.Context, c *conn) error {
		req := &controlv1.ListEndpointsRequest{TenantId: *tenant, PageSize: int32(*size), Cursor: *cursor}
		return show(ctx, c, c.ListEndpoints, req, func(w io.Writer, r *controlv1.ListEndpointsResponse) {
			if len(r.GetEndpoints()) == 0 {
				fmt.Fprintln(w, emptyPage("no endpoints", *cursor))
			}
			for _, e := range r.GetEndpoints() {
				fmt.Fprintf(w, "%-30s %-8s v%-3d %s  %s\n", e.GetEndpointId(), statusName(e.GetStatus()), e.GetConfigVersion(), e.GetSettings().GetUrl(), strings.Join(e.GetSettings().GetEventTypes(), ","))
			}
			if r.GetNextCursor() != "" {
				fmt.Fprintf(w, "(more: --cursor %s)\n", r.GetNextCursor())
			}
		})
	}
}

func endpointsUpdate(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	settings := settingsFlags(fs)
	return func(ctx context.Context, c *conn) error {
		s, paths := settings()
		if len(paths) == 0 {
			return errors.New("endpoints update: nothing to change; give a setting, e.g. --url or --types")
		}
		req := &controlv1.UpdateEndpointRequest{TenantId: *tenant, EndpointId: *id, Settings: s, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
		return show(ctx, c, c.UpdateEndpoint, req, printEndpoint)
	}
}

// emptyPage says that a list has nothing, or nothing more after cursor.
func emptyPage(none, cursor string) string {
	if cursor != "" {
		return strings.Replace(none, "no ", "no more ", 1)
	}
	return none
}

// endpointFlags declares the flags that name one endpoint.
func endpointFlags(fs *flag.FlagSet) (tenant, id *string) {
	return fs.String("tenant", "", "tenant id (admin token only)"), fs.String("id", "", "endpoint id")
}

func endpointsPause(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.PauseEndpoint, &controlv1.PauseEndpointRequest{TenantId: *tenant, EndpointId: *id}, printEndpoint)
	}
}

func endpointsResume(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.ResumeEndpoint, &controlv1.ResumeEndpointRequest{TenantId: *tenant, EndpointId: *id}, printEndpoint)
	}
}

func endpointsDelete(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.DeleteEndpoint, &controlv1.DeleteEndpointRequest{TenantId: *tenant, EndpointId: *id}, printEndpoint)
	}
}

func endpointsRotate(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	overlap := fs.Duration("overlap", 0, "how long the previous secret keeps signing (0: 24h)")
	quiet := quietFlag(fs, "the new signing secret")
	return func(ctx context.Context, c *conn) error {
		req := &controlv1.RotateSecretRequest{TenantId: *tenant, EndpointId: *id, OverlapSeconds: int64(overlap.Seconds())}
		return show(ctx, c, c.RotateSecret, req, func(w io.Writer, r *controlv1.RotateSecretResponse) {
			printNewSecret(w, *quiet, r.GetEndpoint(), r.GetSecret())
		})
	}
}

func endpointsRetire(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	version := fs.Int("version", 0, "secret version to retire")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.RetireSecret, &controlv1.RetireSecretRequest{TenantId: *tenant, EndpointId: *id, Version: int32(*version)}, printEndpoint)
	}
}

func printEndpoint(w io.Writer, e *controlv1.Endpoint) {
	s := e.GetSettings()
	fmt.Fprintf(w, "endpoint     %s\ntenant       %s\nurl          %s\nevent types  %s\nstatus       %s\nconfig       v%d\n",
		e.GetEndpointId(), e.GetTenantId(), s.GetUrl(), strings.Join(s.GetEventTypes(), ", "), statusName(e.GetStatus()), e.GetConfigVersion())
	if a := e.GetAsOf(); a != nil {
		fmt.Fprintf(w, "as of        position %s, recorded %s (%d events)\n", a.GetPosition(), fmtTime(a.GetRecordedAt()), a.GetEvents())
	}
	if c := e.GetCircuit(); c != controlv1.Endpoint_CIRCUIT_UNSPECIFIED {
		fmt.Fprintf(w, "circuit      %s\n", circuitText(c))
	}
	if s.GetDelivery() == "pull" {
		fmt.Fprintln(w, "delivery     pull (hookline endpoints pull)")
	}
	if s.GetOrdering() == "key" {
		fmt.Fprintf(w, "ordering     by key, %s on failure\n", s.GetKeyFailure())
	}
	if s.GetFilter() != "" {
		fmt.Fprintf(w, "filter       %s\n", s.GetFilter())
	}
	if p := s.GetHeaderPrefix(); p != "" {
		fmt.Fprintf(w, "headers as   %sid, %ssignature, …\n", p, p)
	}
	for _, name := range slices.Sorted(maps.Keys(s.GetHeaders())) {
		fmt.Fprintf(w, "header       %s: %s\n", name, s.GetHeaders()[name])
	}
	for _, name := range s.GetSecretHeaderNames() {
		fmt.Fprintf(w, "header       %s: (secret, sealed)\n", name)
	}
	if g := s.GetAuth().GetOauth2(); g != nil {
		fmt.Fprintf(w, "oauth2       %s, client %s, scopes %q (client secret sealed)\n", g.GetTokenUrl(), g.GetClientId(), strings.Join(g.GetScopes(), " "))
	}
	if m := s.GetAuth().GetMtls(); m != nil {
		bundle := ""
		if m.GetCaBundle() != "" {
			bundle = ", the receiver's own CA bundle"
		}
		fmt.Fprintf(w, "mtls         %s (key sealed)%s\n", certSubject(m.GetClientCertificate()), bundle)
	}
	for _, sec := range e.GetSecrets() {
		exp := ""
		if sec.GetExpiresAt() != nil {
			exp = "  retires " + fmtTime(sec.GetExpiresAt())
		}
		fmt.Fprintf(w, "secret v%-4d created %s%s\n", sec.GetVersion(), fmtTime(sec.GetCreatedAt()), exp)
	}
	if e.GetPublicKey() != "" {
		fmt.Fprintf(w, "public key   %s\n", e.GetPublicKey())
	}
}

// circuitText says what an endpoint's circuit breaker lets through.
func circuitText(c controlv1.Endpoint_Circuit) string {
	switch c {
	case controlv1.Endpoint_CIRCUIT_CLOSED:
		return "closed (attempts flow)"
	case controlv1.Endpoint_CIRCUIT_OPEN:
		return "open (no attempt until its cool-down ends: the receiver failed too often in a row)"
	case controlv1.Endpoint_CIRCUIT_HALF_OPEN:
		return "half-open (one probe attempt decides)"
	}
	return strings.ToLower(strings.TrimPrefix(c.String(), "CIRCUIT_"))
}

func statusName(s controlv1.Endpoint_Status) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATUS_"))
}

func fmtTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func eventsPublish(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "event id, unique per tenant (required)")
	typ := fs.String("type", "", "event type, e.g. invoice.paid (required)")
	data := fs.String("data", "", "JSON payload; @FILE reads it from a file, - from stdin")
	schema := fs.String("schema-version", "", "schema version")
	object := fs.String("object-id", "", "id of the object the event is about")
	headers := headerFlag{}
	fs.Var(headers, "header", "a header for endpoint filters, name=value (repeatable)")
	traceparent := fs.String("traceparent", "", "the producer's W3C traceparent (00-<trace id>-<span id>-<flags>): each attempt carries a child span of it")
	tracestate := fs.String("tracestate", "", "the W3C tracestate that goes with --traceparent")
	orderingKey := fs.String("ordering-key", "", "the object the event is about: an endpoint ordered by key gets one key's deliveries one at a time, in order")
	return func(ctx context.Context, c *conn) error {
		payload, err := readData(*data)
		if err != nil {
			return err
		}
		if !json.Valid(payload) {
			return errors.New("events publish: --data is not valid JSON; give a JSON value, e.g. '{\"amount\":42}'")
		}
		ev := client.Event{
			TenantID: *tenant, ID: *id, Type: *typ, Payload: payload, SchemaVersion: *schema, ObjectID: *object,
			Headers: headers, Traceparent: *traceparent, Tracestate: *tracestate, OrderingKey: *orderingKey,
		}
		return show(ctx, c, c.Publish, ev, func(w io.Writer, r *controlv1.PublishResponse) {
			dup := ""
			if r.GetDuplicate() {
				dup = " (already accepted: nothing new written)"
			}
			fmt.Fprintf(w, "event %s%s\ntrace %s\n", r.GetEventId(), dup, r.GetTraceId())
			if v := r.GetSchemaViolation(); v != nil {
				fmt.Fprintf(w, "schema violation (accepted: the tenant's schema enforcement is warn): the payload does not match version %d of the schema of %s at %q: %s (%s)\n",
					v.GetSchemaVersion(), *typ, v.GetPointer(), v.GetMessage(), v.GetKeyword())
			}
			for _, d := range r.GetDeliveries() {
				fmt.Fprintf(w, "  delivery %s -> endpoint %s (config v%d)\n", d.GetDeliveryId(), d.GetEndpointId(), d.GetConfigVersion())
			}
			for _, f := range r.GetFiltered() {
				fmt.Fprintf(w, "  filtered out by endpoint %s (config v%d) %s\n", f.GetEndpointId(), f.GetConfigVersion(), f.GetError())
			}
			if len(r.GetDeliveries())+len(r.GetFiltered()) == 0 {
				fmt.Fprintln(w, "  no endpoint subscribes to this type")
			}
			if r.GetErased() {
				fmt.Fprintln(w, "  erased: its payload was erased with the tenant's data key and is never delivered; publish it under a new --id")
			}
		})
	}
}

// headerFlag collects repeated --header name=value flags.
type headerFlag map[string]string

func (h headerFlag) String() string { return "" }

func (h headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return errors.New("give name=value, e.g. x-region=eu")
	}
	h[name] = value
	return nil
}

// eventsRouting explains what a publish decided for every endpoint.
func eventsRouting(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "event id")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.ExplainRouting, &controlv1.ExplainRoutingRequest{TenantId: *tenant, EventId: *id}, func(w io.Writer, r *controlv1.EventRouting) {
			fmt.Fprintf(w, "event %s (%s) published %s at position %s\n", r.GetEventId(), r.GetEventType(), fmtTime(r.GetPublishedAt()), r.GetPosition())
			if sc := r.GetSchema(); sc != nil {
				fmt.Fprintf(w, "schema version %d of its type held, enforcement %s", sc.GetSchemaVersion(), sc.GetEnforcement())
				if v := sc.GetViolation(); v != nil {
					fmt.Fprintf(w, "; violation recorded at %q: %s (%s)", v.GetPointer(), v.GetMessage(), v.GetKeyword())
				}
				fmt.Fprintln(w)
			}
			if len(r.GetEndpoints()) == 0 {
				fmt.Fprintln(w, "no endpoints: the tenant has had none since the event was published")
			}
			for _, v := range r.GetEndpoints() {
				fmt.Fprintf(w, "%-30s %-14s %s\n", v.GetEndpointId(), strings.ToLower(strings.TrimPrefix(v.GetVerdict().String(), "VERDICT_")), v.GetReason())
				if v.GetFilter() != "" {
					fmt.Fprintf(w, "  filter  %s\n", v.GetFilter())
				}
				for _, fv := range v.GetFilterValues() {
					val := fv.GetError()
					if fv.GetValue() != nil {
						b, _ := protojson.Marshal(fv.GetValue())
						val = string(b)
					}
					fmt.Fprintf(w, "  saw     %s = %s\n", fv.GetExpr(), val)
				}
			}
		})
	}
}

func readData(arg string) ([]byte, error) {
	switch {
	case arg == "":
		return nil, errors.New("events publish: --data is missing; give JSON, @FILE or - for stdin")
	case arg == "-":
		return io.ReadAll(os.Stdin)
	case strings.HasPrefix(arg, "@"):
		return os.ReadFile(arg[1:])
	}
	return []byte(arg), nil
}

func eventsOperationalTypes(fs *flag.FlagSet) func(context.Context, *conn) error {
	examples := fs.Bool("examples", false, "print an example payload of each type")
	return func(ctx context.Context, c *conn) error {
		list := func(ctx context.Context, _ struct{}) (*controlv1.ListOperationalEventTypesResponse, error) {
			types, err := c.ListOperationalEventTypes(ctx)
			return &controlv1.ListOperationalEventTypesResponse{Types: types}, err
		}
		return show(ctx, c, list, struct{}{}, func(w io.Writer, r *controlv1.ListOperationalEventTypesResponse) {
			if len(r.GetTypes()) == 0 {
				fmt.Fprintln(w, "no operational event types")
			}
			for _, t := range r.GetTypes() {
				fmt.Fprintf(w, "%-34s %s\n", t.GetType(), t.GetDescription())
				if *examples {
					fmt.Fprintf(w, "  %s\n", t.GetExample())
				}
			}
		})
	}
}

// certSubject names the first certificate of a PEM chain by its subject
// and expiry.
func certSubject(chain string) string {
	b, _ := pem.Decode([]byte(chain))
	if b == nil {
		return "a client certificate"
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "a client certificate"
	}
	return fmt.Sprintf("client certificate %q, expires %s", c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
}
