package endpoint_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestSecretsStayWithTheirHost: an update that points the endpoint at
// another scheme, host or port keeps no secret given for the old one. It
// must give the secret headers (and the OAuth2 client secret, whose bearer
// token every attempt carries) again, or drop them; otherwise it is
// refused, naming the field, and nothing is written. A new path on the
// same host keeps them.
func TestSecretsStayWithTheirHost(t *testing.T) {
	kr := keyring(t)
	const key = "key-5f3a9c"
	grant := func(secret string) *controlv1.EndpointAuth {
		return &controlv1.EndpointAuth{Oauth2: &controlv1.OAuth2Auth{TokenUrl: "https://auth.example.com/token", ClientId: "hookline", ClientSecret: secret}}
	}
	// withHeader is an endpoint on hookURL with a secret header; withGrant
	// also has an OAuth2 grant.
	withHeader := func(t *testing.T) *endpoint.State {
		s, _ := newEndpoint(t, kr)
		decideApply(t, s, cmd("acme", &controlv1.UpdateEndpointRequest{
			Settings:   &controlv1.EndpointSettings{SecretHeaders: map[string]string{"X-Api-Key": key}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"secret_headers"}},
		}), env(kr, t0, ""))
		return s
	}
	withGrant := func(t *testing.T) *endpoint.State {
		s, _ := newEndpoint(t, kr)
		decideApply(t, s, cmd("acme", &controlv1.UpdateEndpointRequest{
			Settings:   &controlv1.EndpointSettings{Auth: grant("cs-7f1e")},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"auth"}},
		}), env(kr, t0, ""))
		return s
	}
	tests := []struct {
		name     string
		state    func(*testing.T) *endpoint.State
		settings *controlv1.EndpointSettings
		paths    []string
		refused  string // the field a refusal names; "" when accepted
		headers  map[string]string
	}{
		{name: "another path on the same host keeps them", state: withHeader,
			settings: &controlv1.EndpointSettings{Url: "https://hooks.example.com/v2/in"}, paths: []string{"url"},
			headers: map[string]string{"X-Api-Key": key}},
		{name: "the default port named keeps them", state: withHeader,
			settings: &controlv1.EndpointSettings{Url: "https://hooks.example.com:443/in2"}, paths: []string{"url"},
			headers: map[string]string{"X-Api-Key": key}},
		{name: "another host is refused", state: withHeader,
			settings: &controlv1.EndpointSettings{Url: "https://collector.example.net/in"}, paths: []string{"url"},
			refused: "settings.secret_headers"},
		{name: "another port is refused", state: withHeader,
			settings: &controlv1.EndpointSettings{Url: "https://hooks.example.com:8443/in"}, paths: []string{"url"},
			refused: "settings.secret_headers"},
		{name: "another scheme is refused", state: withHeader,
			settings: &controlv1.EndpointSettings{Url: "http://hooks.example.com/in"}, paths: []string{"url"},
			refused: "settings.secret_headers"},
		{name: "another host with the headers given again", state: withHeader,
			settings: &controlv1.EndpointSettings{Url: "https://collector.example.net/in", SecretHeaders: map[string]string{"X-Api-Key": "key-new"}},
			paths:    []string{"url", "secret_headers"}, headers: map[string]string{"X-Api-Key": "key-new"}},
		{name: "another host with the headers dropped", state: withHeader,
			settings: &controlv1.EndpointSettings{Url: "https://collector.example.net/in"},
			paths:    []string{"url", "secret_headers"}, headers: map[string]string{}},
		{name: "another host keeps no grant", state: withGrant,
			settings: &controlv1.EndpointSettings{Url: "https://collector.example.net/in"}, paths: []string{"url"},
			refused: "settings.auth.oauth2.client_secret"},
		{name: "another host keeps no grant restated without its secret", state: withGrant,
			settings: &controlv1.EndpointSettings{Url: "https://collector.example.net/in", Auth: grant("")}, paths: []string{"url", "auth"},
			refused: "settings.auth.oauth2.client_secret"},
		{name: "another host with the grant's secret given again", state: withGrant,
			settings: &controlv1.EndpointSettings{Url: "https://collector.example.net/in", Auth: grant("cs-7f1e")}, paths: []string{"url", "auth"},
			headers: map[string]string{}},
		{name: "another host with the grant dropped", state: withGrant,
			settings: &controlv1.EndpointSettings{Url: "https://collector.example.net/in"}, paths: []string{"url", "auth"},
			headers: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state(t)
			before := proto.CloneOf(s.Config)
			c := cmd("acme", &controlv1.UpdateEndpointRequest{Settings: tt.settings, UpdateMask: &fieldmaskpb.FieldMask{Paths: tt.paths}})
			dec, err := s.Decide("ep_1", c, env(kr, t0, s.URLToCheck(c)))
			if tt.refused != "" {
				var ge *command.Error
				if !errors.As(err, &ge) || ge.Code != internalv1.GrainError_CODE_INVALID_ARGUMENT || ge.Field != tt.refused {
					t.Fatalf("decide = %v; want INVALID_ARGUMENT on %s", err, tt.refused)
				}
				to, _ := url.Parse(tt.settings.GetUrl())
				if !strings.Contains(err.Error(), "https://hooks.example.com:443") || !strings.Contains(err.Error(), to.Scheme+"://"+to.Hostname()) {
					t.Errorf("the refusal %q does not name both origins", err)
				}
				if len(dec.Events) != 0 || !proto.Equal(s.Config, before) {
					t.Fatalf("a refused update wrote %d events", len(dec.Events))
				}
				return
			}
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			for _, ev := range dec.Events {
				s.Apply(ev)
			}
			if s.Config.GetUrl() != tt.settings.GetUrl() {
				t.Fatalf("url = %q, want %q", s.Config.GetUrl(), tt.settings.GetUrl())
			}
			got, err := s.Headers(kr)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.headers) || got["X-Api-Key"] != tt.headers["X-Api-Key"] {
				t.Errorf("headers sent = %v, want %v", got, tt.headers)
			}
		})
	}
}
