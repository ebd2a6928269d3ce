package tenant_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

var (
	t0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	admin = &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_ADMIN, Id: "ops"}
)

func create(name string, q *hooklinev1.Quota) *internalv1.TenantCommand {
	return &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_Create{Create: &controlv1.CreateTenantRequest{Name: name, Quota: q}}}
}

func created(t *testing.T) *tenant.State {
	t.Helper()
	s := &tenant.State{}
	s.Apply(&hooklinev1.TenantCreated{TenantId: "acme", Name: "Acme", At: timestamppb.New(t0)})
	return s
}

func TestDecideValidation(t *testing.T) {
	existing := func(t *testing.T) *tenant.State {
		s := created(t)
		s.Apply(&hooklinev1.ApiKeyIssued{TenantId: "acme", KeyId: "key_a", KeySha256: []byte{1}})
		return s
	}
	tests := []struct {
		name     string
		state    func(*testing.T) *tenant.State
		identity string
		cmd      *internalv1.TenantCommand
		code     internalv1.GrainError_Code
		field    string
		message  string
	}{
		{name: "bad identity", identity: "a-b", cmd: create("A", nil), code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "tenant_id", message: "[A-Za-z0-9_]"},
		{name: "create without name", cmd: create("", nil), code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "name", message: "is required"},
		{name: "create long name", cmd: create(strings.Repeat("x", 201), nil), code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "name", message: "at most 200"},
		{name: "create negative rate", cmd: create("A", &hooklinev1.Quota{AttemptsPerSecond: -1}), code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "quota.attempts_per_second", message: "0 means the default"},
		{name: "create negative in-flight", cmd: create("A", &hooklinev1.Quota{MaxInFlight: -1}), code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "quota.max_in_flight"},
		{name: "create weight", cmd: create("A", &hooklinev1.Quota{Weight: 5000}), code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "quota.weight"},
		{name: "create negative endpoints", cmd: create("A", &hooklinev1.Quota{MaxEndpoints: -1}), code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "quota.max_endpoints", message: "0 means the default"},
		{name: "create other id", cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Create{Create: &controlv1.CreateTenantRequest{TenantId: "other", Name: "A"}}},
			code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "tenant_id", message: "does not match"},
		{name: "create twice", state: existing, cmd: create("A", nil), code: internalv1.GrainError_CODE_ALREADY_EXISTS, field: "tenant_id"},
		{name: "get missing", cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{}}}, code: internalv1.GrainError_CODE_NOT_FOUND, field: "tenant_id"},
		{name: "get other tenant", state: existing, cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{TenantId: "globex"}}}, code: internalv1.GrainError_CODE_NOT_FOUND, field: "tenant_id"},
		{name: "issue on missing tenant", cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_IssueKey{IssueKey: &controlv1.IssueApiKeyRequest{Name: "ci"}}}, code: internalv1.GrainError_CODE_NOT_FOUND, field: "tenant_id"},
		{name: "revoke without id", state: existing, cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_RevokeKey{RevokeKey: &controlv1.RevokeApiKeyRequest{}}}, code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "key_id", message: "is required"},
		{name: "revoke unknown", state: existing, cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_RevokeKey{RevokeKey: &controlv1.RevokeApiKeyRequest{KeyId: "key_zz"}}}, code: internalv1.GrainError_CODE_NOT_FOUND, field: "key_id"},
		{name: "quota missing", state: existing, cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_SetQuota{SetQuota: &controlv1.SetQuotaRequest{}}}, code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "quota"},
		{name: "lease without endpoint", state: existing, cmd: &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Lease{Lease: &internalv1.QuotaLeaseRequest{}}}, code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "endpoint_id"},
		{name: "no command", state: existing, cmd: &internalv1.TenantCommand{}, code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &tenant.State{}
			if tt.state != nil {
				s = tt.state(t)
			}
			id := tt.identity
			if id == "" {
				id = "acme"
			}
			dec, err := s.Decide(id, tt.cmd, t0, bytes.NewReader(make([]byte, 64)))
			var ge *command.Error
			if !errors.As(err, &ge) {
				t.Fatalf("err = %v, want *command.Error", err)
			}
			if ge.Code != tt.code || ge.Field != tt.field || !strings.Contains(ge.Message, tt.message) {
				t.Fatalf("got %v %q %q, want %v %q containing %q", ge.Code, ge.Field, ge.Message, tt.code, tt.field, tt.message)
			}
			if len(dec.Events) != 0 {
				t.Fatalf("refused command decided events: %v", dec.Events)
			}
		})
	}
}

func TestDecideEvents(t *testing.T) {
	s := &tenant.State{}
	q := &hooklinev1.Quota{AttemptsPerSecond: 50, MaxInFlight: 10}
	dec, err := s.Decide("acme", create("Acme", q), t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.Message{&hooklinev1.TenantCreated{TenantId: "acme", Name: "Acme", Quota: q, IssuedBy: admin, At: timestamppb.New(t0)}}
	if diff := cmp.Diff(want, dec.Events, protocmp.Transform()); diff != "" {
		t.Fatalf("create events (-want +got):\n%s", diff)
	}
	s.Apply(dec.Events[0])

	// An API key: shown once, only its hash in the event.
	issue := &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_IssueKey{IssueKey: &controlv1.IssueApiKeyRequest{Name: "billing"}}}
	dec, err = s.Decide("acme", issue, t0, bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	key := dec.Key.GetApiKey()
	if !strings.HasPrefix(key, "hk_") || len(key) != 3+43 || !strings.HasPrefix(dec.Key.GetKeyId(), "key_") {
		t.Fatalf("key %q id %q", key, dec.Key.GetKeyId())
	}
	ev := dec.Events[0].(*hooklinev1.ApiKeyIssued)
	if !bytes.Equal(ev.GetKeySha256(), tenant.HashKey(key)) || ev.GetKeyId() != dec.Key.GetKeyId() || ev.GetName() != "billing" {
		t.Fatalf("issued event %v", ev)
	}
	data, _ := proto.Marshal(ev)
	if bytes.Contains(data, []byte(key)) {
		t.Fatal("the event holds the key")
	}
	s.Apply(ev)

	// Setting the same quota writes nothing; revoking twice writes once.
	same := &internalv1.TenantCommand{Command: &internalv1.TenantCommand_SetQuota{SetQuota: &controlv1.SetQuotaRequest{Quota: q}}}
	if dec, err := s.Decide("acme", same, t0, nil); err != nil || len(dec.Events) != 0 {
		t.Fatalf("same quota: %v, %v", dec.Events, err)
	}
	revoke := &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_RevokeKey{RevokeKey: &controlv1.RevokeApiKeyRequest{KeyId: ev.GetKeyId()}}}
	dec, err = s.Decide("acme", revoke, t0.Add(time.Minute), nil)
	if err != nil || len(dec.Events) != 1 {
		t.Fatalf("revoke: %v, %v", dec.Events, err)
	}
	if by := dec.Events[0].(*hooklinev1.ApiKeyRevoked).GetIssuedBy(); !proto.Equal(by, admin) {
		t.Fatalf("issued_by = %v", by)
	}
	s.Apply(dec.Events[0])
	if dec, err := s.Decide("acme", revoke, t0, nil); err != nil || len(dec.Events) != 0 {
		t.Fatalf("second revoke: %v, %v", dec.Events, err)
	}
	view := s.View()
	if len(view.GetApiKeys()) != 1 || !view.GetApiKeys()[0].GetRevoked() {
		t.Fatalf("view keys %v", view.GetApiKeys())
	}
}

// TestDecideCatalog: a type's versions count from 1, the same definition
// writes nothing, a schema must compile and the example match it; the
// schema enforcement takes off, warn or reject.
func TestDecideCatalog(t *testing.T) {
	s := created(t)
	put := func(desc, example, schema string) (tenant.Decision, error) {
		r := &controlv1.PutEventTypeRequest{EventType: "order.paid", Description: desc}
		for _, f := range []struct {
			text string
			dst  **structpb.Value
		}{{example, &r.Example}, {schema, &r.Schema}} {
			if f.text != "" {
				*f.dst = &structpb.Value{}
				if err := protojson.Unmarshal([]byte(f.text), *f.dst); err != nil {
					t.Fatal(err)
				}
			}
		}
		return s.Decide("acme", &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_PutEventType{PutEventType: r}}, t0, nil)
	}
	apply := func(d tenant.Decision, err error) tenant.Decision {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range d.Events {
			s.Apply(e)
		}
		return d
	}
	const schema = `{"type":"object","properties":{"total":{"type":"number","minimum":0}}}`
	d := apply(put("paid", `{"total": 1}`, schema))
	if len(d.Events) != 1 || d.Events[0].(*hooklinev1.EventTypeDefined).GetVersion() != 1 {
		t.Fatalf("first definition: %v", d.Events)
	}
	if d := apply(put("paid", `{"total":1}`, schema)); len(d.Events) != 0 {
		t.Fatalf("the same definition again wrote %v", d.Events)
	}
	if d := apply(put("paid in full", `{"total":1}`, schema)); d.Events[0].(*hooklinev1.EventTypeDefined).GetVersion() != 2 {
		t.Fatalf("a new description: %v, want version 2", d.Events)
	}
	var ce *command.Error
	for _, tc := range []struct{ example, schema, field string }{
		{`{"total":-1}`, schema, "example"},
		{"", `{"type":"nope"}`, "schema"},
		{"", `{"$ref":"file:///etc/passwd"}`, "schema"},
	} {
		if _, err := put("x", tc.example, tc.schema); !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("example %s, schema %s: %v, want INVALID_ARGUMENT on %s", tc.example, tc.schema, err, tc.field)
		}
	}

	update := func(mode string) (tenant.Decision, error) {
		return s.Decide("acme", &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_Update{Update: &controlv1.UpdateTenantRequest{
			Settings: &controlv1.TenantSettings{SchemaEnforcement: mode}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"schema_enforcement"}},
		}}}, t0, nil)
	}
	apply(update("reject"))
	if s.SchemaEnforcement != hooklinev1.SchemaEnforcement_SCHEMA_ENFORCEMENT_REJECT || s.View().GetSettings().GetSchemaEnforcement() != "reject" {
		t.Fatalf("after reject: %v", s.SchemaEnforcement)
	}
	if d := apply(update("reject")); len(d.Events) != 0 {
		t.Fatal("the same setting again wrote an event")
	}
	if _, err := update("strict"); !errors.As(err, &ce) || !strings.Contains(err.Error(), "off, warn or reject") {
		t.Fatalf("an unknown mode: %v", err)
	}
}

// TestDecideRetentionAndErase: a retention setting keeps the schema
// enforcement as it was and is refused when too short or not a duration;
// an erase needs its confirmation and records a destroyed key once.
func TestDecideRetentionAndErase(t *testing.T) {
	s := created(t)
	decide := func(c *internalv1.TenantCommand) (tenant.Decision, error) {
		c.IssuedBy = admin
		d, err := s.Decide("acme", c, t0, nil)
		for _, e := range d.Events {
			s.Apply(e)
		}
		return d, err
	}
	retention := func(v string) (tenant.Decision, error) {
		return decide(&internalv1.TenantCommand{Command: &internalv1.TenantCommand_Update{Update: &controlv1.UpdateTenantRequest{
			Settings: &controlv1.TenantSettings{Retention: v}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"retention"}},
		}}})
	}
	if _, err := retention("168h"); err != nil || s.Retention != 168*time.Hour || s.View().GetSettings().GetRetention() != "168h0m0s" {
		t.Fatalf("retention 168h: %v, %v", s.Retention, err)
	}
	for _, bad := range []string{"30s", "-1h", "a week"} {
		if _, err := retention(bad); err == nil || !strings.Contains(err.Error(), "settings.retention") {
			t.Errorf("retention %q: %v, want refused naming settings.retention", bad, err)
		}
	}
	if _, err := retention(""); err != nil || s.Retention != 0 {
		t.Fatalf("retention back to the node's: %v, %v", s.Retention, err)
	}

	erase := func(confirm, key string) (tenant.Decision, error) {
		return decide(&internalv1.TenantCommand{Command: &internalv1.TenantCommand_Erase{Erase: &internalv1.EraseTenant{
			Request: &controlv1.EraseTenantRequest{TenantId: "acme", Confirm: confirm}, DataKeyId: key}}})
	}
	if _, err := erase("acm", "dk_1"); err == nil || !strings.Contains(err.Error(), "confirm") {
		t.Fatalf("erase with a wrong confirmation: %v", err)
	}
	if d, err := erase("acme", "dk_1"); err != nil || len(d.Events) != 1 || s.View().GetErasedAt() == nil {
		t.Fatalf("erase: %v, %v", d.Events, err)
	}
	if d, err := erase("acme", "dk_1"); err != nil || len(d.Events) != 0 {
		t.Fatalf("erasing the same key again wrote %v, %v", d.Events, err)
	}
}
