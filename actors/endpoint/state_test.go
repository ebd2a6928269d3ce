package endpoint_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

var (
	t0   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	user = &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_API_KEY, Id: "key_abc"}
)

const hookURL = "https://hooks.example.com/in"

func keyring(t testing.TB) *seal.Keyring {
	t.Helper()
	k := make([]byte, seal.KeySize)
	rand.Read(k)
	kr, err := seal.NewKeyring(seal.Key{Secret: k})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func settings() *controlv1.EndpointSettings {
	return &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"invoice.paid"}}
}

func cmd(tenant string, c any) *internalv1.EndpointCommand {
	out := &internalv1.EndpointCommand{IssuedBy: user, TenantId: tenant}
	switch c := c.(type) {
	case *controlv1.CreateEndpointRequest:
		out.Command = &internalv1.EndpointCommand_Create{Create: c}
	case *controlv1.GetEndpointRequest:
		out.Command = &internalv1.EndpointCommand_Get{Get: c}
	case *controlv1.UpdateEndpointRequest:
		out.Command = &internalv1.EndpointCommand_Update{Update: c}
	case *controlv1.RotateSecretRequest:
		out.Command = &internalv1.EndpointCommand_Rotate{Rotate: c}
	case *controlv1.RetireSecretRequest:
		out.Command = &internalv1.EndpointCommand_Retire{Retire: c}
	case *controlv1.PauseEndpointRequest:
		out.Command = &internalv1.EndpointCommand_Pause{Pause: c}
	case *controlv1.ResumeEndpointRequest:
		out.Command = &internalv1.EndpointCommand_Resume{Resume: c}
	case *controlv1.DeleteEndpointRequest:
		out.Command = &internalv1.EndpointCommand_Delete{Delete: c}
	case *controlv1.ReplayDeliveryRequest:
		out.Command = &internalv1.EndpointCommand_Replay{Replay: c}
	case *internalv1.Wake:
		out.Command = &internalv1.EndpointCommand_Wake{Wake: c}
	case *controlv1.PullDeliveriesRequest:
		out.Command = &internalv1.EndpointCommand_Pull{Pull: c}
	case *controlv1.AckDeliveriesRequest:
		out.Command = &internalv1.EndpointCommand_Ack{Ack: c}
	case *controlv1.SkipOrderingKeyRequest:
		out.Command = &internalv1.EndpointCommand_SkipOrderingKey{SkipOrderingKey: c}
	}
	return out
}

// env answers URL checks as the policy would for a public host.
func env(kr *seal.Keyring, now time.Time, url string) endpoint.Env {
	return endpoint.Env{Now: now, Rand: rand.Reader, Keyring: kr, URL: endpoint.URLVerdict{Raw: url, Normalised: url}}
}

// decideApply decides c on s and applies its events, failing on refusal.
func decideApply(t *testing.T, s *endpoint.State, c *internalv1.EndpointCommand, e endpoint.Env) endpoint.Decision {
	t.Helper()
	if e.URL.Raw == "" {
		e.URL.Raw = s.URLToCheck(c)
		e.URL.Normalised = e.URL.Raw
	}
	dec, err := s.Decide("ep_1", c, e)
	if err != nil {
		t.Fatalf("decide %v: %v", c, err)
	}
	for _, ev := range dec.Events {
		s.Apply(ev)
	}
	return dec
}

func newEndpoint(t *testing.T, kr *seal.Keyring) (*endpoint.State, string) {
	t.Helper()
	s := &endpoint.State{}
	dec := decideApply(t, s, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()}), env(kr, t0, hookURL))
	return s, dec.Secret
}

func TestDecideRefusals(t *testing.T) {
	kr := keyring(t)
	live := func(t *testing.T) *endpoint.State { s, _ := newEndpoint(t, kr); return s }
	deleted := func(t *testing.T) *endpoint.State {
		s := live(t)
		decideApply(t, s, cmd("acme", &controlv1.DeleteEndpointRequest{}), env(kr, t0, ""))
		return s
	}
	empty := func(*testing.T) *endpoint.State { return &endpoint.State{} }
	blocked := endpoint.URLVerdict{Raw: "https://10.0.0.1/", Err: &attempt.PolicyError{Rule: attempt.RuleAddress, Detail: "host 10.0.0.1 is a private address; use a public one"}}
	tests := []struct {
		name    string
		state   func(*testing.T) *endpoint.State
		cmd     *internalv1.EndpointCommand
		url     endpoint.URLVerdict
		code    internalv1.GrainError_Code
		field   string
		message string
	}{
		{"no tenant", live, cmd("", &controlv1.GetEndpointRequest{}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "tenant_id", "is required"},
		{"other tenant", live, cmd("globex", &controlv1.GetEndpointRequest{}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_NOT_FOUND, "endpoint_id", "not found"},
		{"other tenant in request", live, cmd("acme", &controlv1.GetEndpointRequest{TenantId: "globex"}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_NOT_FOUND, "endpoint_id", "not found"},
		{"other tenant updates", live, cmd("globex", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{Description: "x"}}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_NOT_FOUND, "endpoint_id", "not found"},
		{"wrong endpoint id", live, cmd("acme", &controlv1.GetEndpointRequest{EndpointId: "ep_2"}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "endpoint_id", "does not match"},
		{"missing", empty, cmd("acme", &controlv1.GetEndpointRequest{}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_NOT_FOUND, "endpoint_id", "not found"},
		{"deleted get", deleted, cmd("acme", &controlv1.GetEndpointRequest{}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_NOT_FOUND, "endpoint_id", "not found"},
		{"deleted pause", deleted, cmd("acme", &controlv1.PauseEndpointRequest{}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_NOT_FOUND, "endpoint_id", "not found"},
		{"create on deleted", deleted, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_ALREADY_EXISTS, "endpoint_id", "is taken"},
		{"create twice", live, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_ALREADY_EXISTS, "endpoint_id", "is taken"},
		{"create without url", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{EventTypes: []string{"*"}}}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.url", "is required"},
		{"create blocked url", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: "https://10.0.0.1/", EventTypes: []string{"*"}}}), blocked, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.url", "private address; use a public one"},
		{"create unresolvable url", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()}), endpoint.URLVerdict{Raw: hookURL, Err: attempt.ErrResolve}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.url", "does not resolve"},
		{"no event types", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.event_types", `"*" for all`},
		{"event type with space", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"invoice paid"}}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.event_types", "spaces"},
		{"pattern with a star inside", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"order.paid", "*.paid"}}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.event_types", "a trailing .*"},
		{"timeout too long", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"*"}, TimeoutMs: 60_000}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.timeout_ms", "between 1000 and 30000"},
		{"unknown ordering", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"*"}, Ordering: "fifo"}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.ordering", `use "none"`},
		{"unknown key failure", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"*"}, Ordering: "key", KeyFailure: "stop"}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.key_failure", `use "continue"`},
		{"key failure unordered", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"*"}, KeyFailure: "park"}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.key_failure", `set settings.ordering to "key"`},
		{"unknown delivery", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"*"}, Delivery: "email"}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.delivery", `"pull"`},
		{"pull with a url", empty, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"*"}, Delivery: "pull"}}), endpoint.URLVerdict{Raw: hookURL, Normalised: hookURL}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.url", "pull endpoint"},
		{"update blocked url", live, cmd("acme", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: "https://10.0.0.1/"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"settings.url"}}}), blocked, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.url", "private address"},
		{"update unknown path", live, cmd("acme", &controlv1.UpdateEndpointRequest{UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"settings.colour"}}}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "update_mask", `unknown path "settings.colour"`},
		{"update clears url", live, cmd("acme", &controlv1.UpdateEndpointRequest{UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"url"}}}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "settings.url", "is required"},
		{"update nothing", live, cmd("acme", &controlv1.UpdateEndpointRequest{}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "update_mask", "name the fields"},
		{"rotate negative overlap", live, cmd("acme", &controlv1.RotateSecretRequest{OverlapSeconds: -1}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "overlap_seconds", "between 0 and"},
		{"retire current", live, cmd("acme", &controlv1.RetireSecretRequest{Version: 1}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_FAILED_PRECONDITION, "version", "rotate first"},
		{"retire unknown", live, cmd("acme", &controlv1.RetireSecretRequest{Version: 7}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_NOT_FOUND, "version", "no live secret of version 7"},
		{"retire no version", live, cmd("acme", &controlv1.RetireSecretRequest{}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "version", "is required"},
		{"replay without the loop", live, cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: "dlv_1"}), endpoint.URLVerdict{}, internalv1.GrainError_CODE_FAILED_PRECONDITION, "", "delivery loop"},
		{"no command", live, &internalv1.EndpointCommand{TenantId: "acme"}, endpoint.URLVerdict{}, internalv1.GrainError_CODE_INVALID_ARGUMENT, "command", "is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state(t)
			e := env(kr, t0, "")
			e.URL = tt.url
			dec, err := s.Decide("ep_1", tt.cmd, e)
			var ge *command.Error
			if !errors.As(err, &ge) {
				t.Fatalf("err = %v, want *command.Error", err)
			}
			if ge.Code != tt.code || ge.Field != tt.field || !strings.Contains(ge.Message, tt.message) {
				t.Fatalf("got %v %q %q, want %v %q containing %q", ge.Code, ge.Field, ge.Message, tt.code, tt.field, tt.message)
			}
			if len(dec.Events) != 0 || dec.Secret != "" {
				t.Fatalf("refused command decided %v", dec)
			}
		})
	}
}

func TestApplyMask(t *testing.T) {
	current := &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"a"}, Description: "old", MaxAttempts: 5, Metadata: map[string]string{"k": "v"}}
	update := &controlv1.EndpointSettings{Url: "https://new.example.com/", Description: "new", EventTypes: []string{"b", "c"}}
	tests := []struct {
		name  string
		paths []string
		want  *controlv1.EndpointSettings
	}{
		{"bare path", []string{"description"}, &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"a"}, Description: "new", MaxAttempts: 5, Metadata: map[string]string{"k": "v"}}},
		{"settings. path", []string{"settings.url", "settings.event_types"}, &controlv1.EndpointSettings{Url: "https://new.example.com/", EventTypes: []string{"b", "c"}, Description: "old", MaxAttempts: 5, Metadata: map[string]string{"k": "v"}}},
		{"named but unset clears", []string{"max_attempts", "settings.metadata"}, &controlv1.EndpointSettings{Url: hookURL, EventTypes: []string{"a"}, Description: "old"}},
		{"no mask takes set fields", nil, &controlv1.EndpointSettings{Url: "https://new.example.com/", EventTypes: []string{"b", "c"}, Description: "new", MaxAttempts: 5, Metadata: map[string]string{"k": "v"}}},
		{"settings replaces all", []string{"settings"}, update},
		{"star replaces all", []string{"*"}, update},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := endpoint.ApplyMask(current, update, tt.paths)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	if current.GetDescription() != "old" {
		t.Fatal("ApplyMask changed its input")
	}
}

func TestUpdateRaisesConfigVersion(t *testing.T) {
	kr := keyring(t)
	s, _ := newEndpoint(t, kr)
	up := cmd("acme", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{Description: "billing"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
	dec := decideApply(t, s, up, env(kr, t0.Add(time.Minute), ""))
	ev := dec.Events[0].(*hooklinev1.EndpointUpdated)
	if ev.GetConfigVersion() != 2 || ev.GetConfig().GetUrl() != hookURL || ev.GetConfig().GetDescription() != "billing" {
		t.Fatalf("updated %v", ev)
	}
	if s.ConfigVersion != 2 || !s.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("state version %d updated %v", s.ConfigVersion, s.UpdatedAt)
	}
	// The same update again changes nothing and writes nothing.
	if dec := decideApply(t, s, up, env(kr, t0, "")); len(dec.Events) != 0 {
		t.Fatalf("no-op update decided %v", dec.Events)
	}
}

func TestRotationOverlap(t *testing.T) {
	kr := keyring(t)
	s, first := newEndpoint(t, kr)
	dec := decideApply(t, s, cmd("acme", &controlv1.RotateSecretRequest{OverlapSeconds: 3600}), env(kr, t0, ""))
	second := dec.Secret
	if !strings.HasPrefix(second, "whsec_") || second == first {
		t.Fatalf("rotate secret %q", second)
	}
	rot := dec.Events[0].(*hooklinev1.SecretRotated)
	if rot.GetPreviousVersion() != 1 || rot.GetSecret().GetVersion() != 2 || !rot.GetPreviousExpiresAt().AsTime().Equal(t0.Add(time.Hour)) {
		t.Fatalf("rotated %v", rot)
	}
	view := s.View()
	if len(view.GetSecrets()) != 2 || view.GetSecrets()[0].GetVersion() != 2 || view.GetSecrets()[1].GetExpiresAt() == nil {
		t.Fatalf("view secrets %v", view.GetSecrets())
	}
	live, err := s.LiveSecrets(kr)
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := attempt.ParseSecret(first)
	k2, _ := attempt.ParseSecret(second)
	if len(live) != 2 || live[0].Version != 2 || !bytes.Equal(live[0].Key, k2) || !bytes.Equal(live[1].Key, k1) {
		t.Fatalf("live secrets %v", live)
	}

	if due := s.RetireExpired(t0.Add(time.Hour - time.Second)); len(due) != 0 {
		t.Fatalf("retired before the overlap ended: %v", due)
	}
	if next, ok := s.NextExpiry(); !ok || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next expiry %v %v", next, ok)
	}
	due := s.RetireExpired(t0.Add(time.Hour))
	if len(due) != 1 {
		t.Fatalf("due %v", due)
	}
	ret := due[0].(*hooklinev1.SecretRetired)
	if ret.GetVersion() != 1 || ret.GetReason() != hooklinev1.SecretRetired_REASON_OVERLAP_ENDED || ret.GetIssuedBy().GetKind() != hooklinev1.Actor_KIND_SYSTEM {
		t.Fatalf("retired %v", ret)
	}
	s.Apply(ret)
	if live, _ := s.LiveSecrets(kr); len(live) != 1 || live[0].Version != 2 {
		t.Fatalf("after retirement %v", live)
	}
	if _, ok := s.NextExpiry(); ok {
		t.Fatal("an expiry is left")
	}

	// Early retirement on request, after another rotation.
	decideApply(t, s, cmd("acme", &controlv1.RotateSecretRequest{}), env(kr, t0.Add(2*time.Hour), ""))
	if s.Secrets[0].ExpiresAt != t0.Add(2*time.Hour+endpoint.DefaultOverlap) {
		t.Fatalf("default overlap: expires %v", s.Secrets[0].ExpiresAt)
	}
	dec = decideApply(t, s, cmd("acme", &controlv1.RetireSecretRequest{Version: 2}), env(kr, t0.Add(2*time.Hour), ""))
	if r := dec.Events[0].(*hooklinev1.SecretRetired); r.GetReason() != hooklinev1.SecretRetired_REASON_REQUESTED || r.GetIssuedBy().GetId() != "key_abc" {
		t.Fatalf("requested retirement %v", r)
	}
	if v := s.View().GetSecrets(); len(v) != 1 || v[0].GetVersion() != 3 {
		t.Fatalf("secrets %v", v)
	}
}

func TestSealedSecretIsBound(t *testing.T) {
	kr := keyring(t)
	s, secret := newEndpoint(t, kr)
	sealed := s.Secrets[0].Sealed
	if sealed.GetMasterKeyId() != kr.CurrentID() || bytes.Contains(sealed.GetCiphertext(), []byte(secret)) {
		t.Fatalf("sealed %v", sealed)
	}
	// The same ciphertext moved to another endpoint does not open.
	other := *s
	other.EndpointID = "ep_2"
	if _, err := other.LiveSecrets(kr); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("moved secret opened: %v", err)
	}
}

func TestEd25519(t *testing.T) {
	kr := keyring(t)
	s, _ := newEndpoint(t, kr)
	if pk, err := s.PublicKey(kr); pk != "" || err != nil {
		t.Fatalf("public key without ed25519: %q %v", pk, err)
	}
	on := cmd("acme", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{SignEd25519: true}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"sign_ed25519"}}})
	dec := decideApply(t, s, on, env(kr, t0, ""))
	ns := dec.Events[0].(*hooklinev1.EndpointUpdated).GetNewSecret()
	if ns.GetVersion() != 1 || len(ns.GetEd25519SeedCiphertext()) == 0 {
		t.Fatalf("new secret %v", ns)
	}
	seed, err := s.SigningKey(kr)
	if err != nil || len(seed) != 32 {
		t.Fatalf("seed %d bytes, %v", len(seed), err)
	}
	if pk, err := s.PublicKey(kr); pk != attempt.PublicKey(seed) || !strings.HasPrefix(pk, "whpk_") || err != nil {
		t.Fatalf("public key %q %v", pk, err)
	}
	// A rotation while ed25519 is on brings a new seed with the new secret.
	decideApply(t, s, cmd("acme", &controlv1.RotateSecretRequest{}), env(kr, t0, ""))
	seed2, _ := s.SigningKey(kr)
	if bytes.Equal(seed, seed2) || len(seed2) != 32 {
		t.Fatal("rotation kept the seed")
	}
}
