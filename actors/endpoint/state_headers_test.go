package endpoint_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/internal/testpki"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// TestSecretHeaders: a secret header's value is sealed in the event that
// sets it, never shown on reads, sent with the plain headers, kept by an
// update that does not name it, replaced by one that does, and resealed
// under a new master key like the signing secrets.
func TestSecretHeaders(t *testing.T) {
	oldKey, newKey := make([]byte, seal.KeySize), make([]byte, seal.KeySize)
	rand.Read(oldKey)
	rand.Read(newKey)
	krOld, _ := seal.NewKeyring(seal.Key{Secret: oldKey})
	krBoth, _ := seal.NewKeyring(seal.Key{Secret: newKey}, seal.Key{Secret: oldKey})
	krNew, _ := seal.NewKeyring(seal.Key{Secret: newKey})
	update := func(s *controlv1.EndpointSettings, paths ...string) *internalv1.EndpointCommand {
		return cmd("acme", &controlv1.UpdateEndpointRequest{Settings: s, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
	}

	s, _ := newEndpoint(t, krOld)
	const token = "Bearer tok-5f3a9c"
	dec := decideApply(t, s, update(&controlv1.EndpointSettings{
		Headers:       map[string]string{"X-Region": "eu"},
		SecretHeaders: map[string]string{"Authorization": token},
	}, "headers", "secret_headers"), env(krOld, t0, ""))
	for _, ev := range dec.Events {
		b, _ := proto.Marshal(ev)
		if bytes.Contains(b, []byte("tok-5f3a9c")) {
			t.Fatalf("%T holds the secret header's value in clear", ev)
		}
	}
	want := map[string]string{"X-Region": "eu", "Authorization": token}
	if got, err := s.Headers(krOld); err != nil || !cmp.Equal(got, want) {
		t.Fatalf("headers sent = %v, %v; want %v", got, err, want)
	}
	if v := s.Settings(); len(v.GetSecretHeaders()) != 0 || !cmp.Equal(v.GetSecretHeaderNames(), []string{"Authorization"}) {
		t.Fatalf("the read shows secret headers %v, names %v; want no value and the name", v.GetSecretHeaders(), v.GetSecretHeaderNames())
	}

	// An update that does not name them keeps them; naming them with the
	// same values changes nothing; a new value replaces the old.
	decideApply(t, s, update(&controlv1.EndpointSettings{Description: "billing"}, "description"), env(krOld, t0, ""))
	if got, _ := s.Headers(krOld); got["Authorization"] != token {
		t.Fatalf("an update of the description lost the secret header: %v", got)
	}
	same := update(&controlv1.EndpointSettings{SecretHeaders: map[string]string{"Authorization": token}}, "secret_headers")
	if dec := decideApply(t, s, same, env(krOld, t0, "")); len(dec.Events) != 0 {
		t.Fatalf("setting the same secret header wrote %d events, want none", len(dec.Events))
	}
	decideApply(t, s, update(&controlv1.EndpointSettings{SecretHeaders: map[string]string{"Authorization": "Bearer tok-2"}}, "secret_headers"), env(krOld, t0, ""))
	if got, _ := s.Headers(krOld); got["Authorization"] != "Bearer tok-2" {
		t.Fatalf("after the replacement the header is %q", got["Authorization"])
	}

	// The same name in both sets, or one Hookline sets, is refused.
	var ge *command.Error
	_, err := s.Decide("ep_1", update(&controlv1.EndpointSettings{Headers: map[string]string{"Authorization": "x"}}, "headers"), env(krOld, t0, ""))
	if !errors.As(err, &ge) || ge.Code != internalv1.GrainError_CODE_INVALID_ARGUMENT || !strings.Contains(err.Error(), "settings.secret_headers") {
		t.Errorf("the same name in headers and secret_headers: %v, want INVALID_ARGUMENT on settings.secret_headers", err)
	}
	_, err = s.Decide("ep_1", update(&controlv1.EndpointSettings{SecretHeaders: map[string]string{"webhook-signature": "x"}}, "secret_headers"), env(krOld, t0, ""))
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), "settings.secret_headers") {
		t.Errorf("a secret header named like Hookline's: %v, want INVALID_ARGUMENT on settings.secret_headers", err)
	}

	decideApply(t, s, cmd("acme", &controlv1.UpdateEndpointRequest{
		Settings: &controlv1.EndpointSettings{
			Auth:          &controlv1.EndpointAuth{Oauth2: &controlv1.OAuth2Auth{TokenUrl: "https://auth.example.com/t", ClientId: "c", ClientSecret: "cs-1"}},
			SecretHeaders: map[string]string{"X-Api-Key": "key-9"}, // Authorization is the grant's now
		},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"auth", "secret_headers"}},
	}), env(krOld, t0, ""))
	cert, key := testpki.NewCA(t, "ca").Client(t, "c", t0.Add(time.Hour))
	decideApply(t, s, cmd("acme", &controlv1.UpdateEndpointRequest{
		Settings:   &controlv1.EndpointSettings{Auth: &controlv1.EndpointAuth{Mtls: &controlv1.MTLSAuth{ClientCertificate: cert, ClientKey: key}}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"auth.mtls"}},
	}), env(krOld, t0, ""))

	reseal := cmd("acme", nil)
	reseal.Command = &internalv1.EndpointCommand_Reseal{Reseal: &internalv1.Reseal{}}
	dec = decideApply(t, s, reseal, env(krBoth, t0, ""))
	resealed := 0
	for _, ev := range dec.Events {
		if _, ok := ev.(*hooklinev1.HeadersResealed); ok {
			resealed++
		}
	}
	if resealed != 1 {
		t.Fatalf("reseal wrote %d HeadersResealed, want 1", resealed)
	}
	if got, err := s.Headers(krNew); err != nil || got["X-Api-Key"] != "key-9" {
		t.Fatalf("after the reseal the new key alone opens %v, %v", got, err)
	}
	if g, _, err := s.OAuth2(krNew); err != nil || g.ClientSecret != "cs-1" {
		t.Fatalf("after the reseal the new key alone opens the client secret: %v", err)
	}
	if ct, err := s.ClientTLS(krNew); err != nil || ct.PrivateKey != key {
		t.Fatalf("after the reseal the new key alone opens the client key: %v", err)
	}
	if dec := decideApply(t, s, reseal, env(krBoth, t0, "")); len(dec.Events) != 0 {
		t.Fatalf("a second reseal wrote %d events, want none", len(dec.Events))
	}
}

// TestOAuth2Settings: an OAuth2 grant's client secret is sealed and never
// shown; an update that keeps the token URL and client id may leave the
// secret out, one that changes them may not; it reseals with the rest.
func TestOAuth2Settings(t *testing.T) {
	kr := keyring(t)
	grant := func(url, id, secret string) *controlv1.EndpointAuth {
		return &controlv1.EndpointAuth{Oauth2: &controlv1.OAuth2Auth{TokenUrl: url, ClientId: id, ClientSecret: secret, Scopes: []string{"hooks"}}}
	}
	update := func(a *controlv1.EndpointAuth) *internalv1.EndpointCommand {
		return cmd("acme", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{Auth: a}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"auth"}}})
	}
	s, _ := newEndpoint(t, kr)
	var ge *command.Error
	if _, err := s.Decide("ep_1", update(grant("https://auth.example.com/token", "hookline", "")), env(kr, t0, "")); !errors.As(err, &ge) || !strings.Contains(err.Error(), "settings.auth.oauth2.client_secret") {
		t.Fatalf("a new grant without a client secret: %v, want INVALID_ARGUMENT on its client_secret", err)
	}
	dec := decideApply(t, s, update(grant("https://auth.example.com/token", "hookline", "cs-7f1e")), env(kr, t0, ""))
	for _, ev := range dec.Events {
		if b, _ := proto.Marshal(ev); bytes.Contains(b, []byte("cs-7f1e")) {
			t.Fatalf("%T holds the client secret in clear", ev)
		}
	}
	if a := s.Settings().GetAuth().GetOauth2(); a.GetClientSecret() != "" || !a.GetClientSecretSet() || a.GetClientId() != "hookline" {
		t.Fatalf("the read shows %v", a)
	}
	g, key, err := s.OAuth2(kr)
	if err != nil || g.ClientSecret != "cs-7f1e" || g.TokenURL != "https://auth.example.com/token" || key == "" {
		t.Fatalf("the grant opened: %+v, key %q, %v", g, key, err)
	}
	// Same URL and id, no secret: kept. Another client id: required.
	decideApply(t, s, update(grant("https://auth.example.com/token", "hookline", "")), env(kr, t0, ""))
	if g, _, _ := s.OAuth2(kr); g.ClientSecret != "cs-7f1e" {
		t.Fatalf("an update without the secret lost it: %q", g.ClientSecret)
	}
	if _, err := s.Decide("ep_1", update(grant("https://auth.example.com/token", "other", "")), env(kr, t0, "")); !errors.As(err, &ge) {
		t.Fatalf("another client id without its secret: %v, want INVALID_ARGUMENT", err)
	}
	// A client certificate beside the grant, by its own path: the grant
	// stays. The same certificate without its key keeps the key; another
	// needs its own.
	ca := testpki.NewCA(t, "ca")
	cert, key := ca.Client(t, "c1", t0.Add(time.Hour))
	cert2, _ := ca.Client(t, "c2", t0.Add(time.Hour))
	mtls := func(cert, key string) *internalv1.EndpointCommand {
		return cmd("acme", &controlv1.UpdateEndpointRequest{
			Settings:   &controlv1.EndpointSettings{Auth: &controlv1.EndpointAuth{Mtls: &controlv1.MTLSAuth{ClientCertificate: cert, ClientKey: key}}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"auth.mtls"}},
		})
	}
	decideApply(t, s, mtls(cert, key), env(kr, t0, ""))
	ct, err := s.ClientTLS(kr)
	if err != nil || ct.PrivateKey != key || s.Config.GetOauth2() == nil {
		t.Fatalf("after auth.mtls: key opened %v, grant kept %v", err, s.Config.GetOauth2() != nil)
	}
	decideApply(t, s, mtls(cert, ""), env(kr, t0, ""))
	if ct, _ := s.ClientTLS(kr); ct.PrivateKey != key {
		t.Fatal("the same certificate without its key lost the key")
	}
	if _, err := s.Decide("ep_1", mtls(cert2, ""), env(kr, t0, "")); !errors.As(err, &ge) || !strings.Contains(err.Error(), "settings.auth.mtls.client_key") {
		t.Fatalf("another certificate without its key: %v", err)
	}
	if _, err := s.Decide("ep_1", mtls(cert2, key), env(kr, t0, "")); !errors.As(err, &ge) || !strings.Contains(err.Error(), "settings.auth.mtls") {
		t.Fatalf("a certificate with another's key: %v", err)
	}

	// A static Authorization header beside a grant is refused.
	both := cmd("acme", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{SecretHeaders: map[string]string{"authorization": "x"}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"secret_headers"}}})
	if _, err := s.Decide("ep_1", both, env(kr, t0, "")); !errors.As(err, &ge) || !strings.Contains(err.Error(), "settings.auth") {
		t.Fatalf("an Authorization header beside a grant: %v, want INVALID_ARGUMENT on settings.auth", err)
	}
	for _, bad := range []*controlv1.EndpointAuth{
		grant("ftp://auth.example.com/token", "hookline", "x"),
		grant("https://user:pw@auth.example.com/token", "hookline", "x"),
		grant("https://auth.example.com/token", "", "x"),
		{Oauth2: &controlv1.OAuth2Auth{TokenUrl: "https://auth.example.com/token", ClientId: "h", ClientSecret: "x", Scopes: []string{"a b"}}},
	} {
		if _, err := s.Decide("ep_1", update(bad), env(kr, t0, "")); !errors.As(err, &ge) || !strings.Contains(err.Error(), "settings.auth.oauth2.") {
			t.Errorf("grant %v: %v, want INVALID_ARGUMENT naming its field", bad, err)
		}
	}
}

// TestBrokerURLCredentials: a broker URL's password (or NATS token) is
// sealed apart from the URL, which keeps only the user; an update with the
// same scheme, host and user and no password keeps it, another user or
// host drops it, an empty userinfo clears it; a new master key reseals it.
func TestBrokerURLCredentials(t *testing.T) {
	oldKey, newKey := make([]byte, seal.KeySize), make([]byte, seal.KeySize)
	rand.Read(oldKey)
	rand.Read(newKey)
	kr, _ := seal.NewKeyring(seal.Key{Secret: oldKey})
	krBoth, _ := seal.NewKeyring(seal.Key{Secret: newKey}, seal.Key{Secret: oldKey})
	krNew, _ := seal.NewKeyring(seal.Key{Secret: newKey})
	s, _ := newEndpoint(t, kr)
	setURL := func(u string) endpoint.Decision {
		t.Helper()
		return decideApply(t, s, cmd("acme", &controlv1.UpdateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: u},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"url"}}}), env(kr, t0, ""))
	}
	check := func(wantURL, wantPassword string) {
		t.Helper()
		pw, err := s.URLPassword(kr)
		if got := s.Settings(); got.GetUrl() != wantURL || pw != wantPassword || err != nil || got.GetUrlPasswordSet() != (wantPassword != "") {
			t.Fatalf("url %q, password %q, set %v, %v; want %q and %q", got.GetUrl(), pw, got.GetUrlPasswordSet(), err, wantURL, wantPassword)
		}
	}
	dec := setURL("amqp://app:pw-9c2e@mq.example.com/prod?exchange=hooks")
	for _, ev := range dec.Events {
		if b, _ := proto.Marshal(ev); bytes.Contains(b, []byte("pw-9c2e")) {
			t.Fatalf("%T holds the URL password in clear", ev)
		}
	}
	check("amqp://app@mq.example.com/prod?exchange=hooks", "pw-9c2e")
	setURL("amqp://app@mq.example.com/prod?exchange=hooks&routing_key=orders") // same user: kept
	check("amqp://app@mq.example.com/prod?exchange=hooks&routing_key=orders", "pw-9c2e")
	setURL("amqp://other@mq.example.com/prod?exchange=hooks") // another user: dropped
	check("amqp://other@mq.example.com/prod?exchange=hooks", "")
	setURL("nats://tok-51a0@nats.example.com/hooks.orders") // a NATS token
	check("nats://nats.example.com/hooks.orders", "tok-51a0")
	setURL("nats://nats.example.com/hooks.payments")
	check("nats://nats.example.com/hooks.payments", "tok-51a0")

	// A new master key reseals the password; the old key then opens
	// nothing the endpoint holds.
	reseal := cmd("acme", nil)
	reseal.Command = &internalv1.EndpointCommand_Reseal{Reseal: &internalv1.Reseal{}}
	decideApply(t, s, reseal, env(krBoth, t0, ""))
	if pw, err := s.URLPassword(krNew); err != nil || pw != "tok-51a0" {
		t.Fatalf("after the reseal: %q, %v", pw, err)
	}

	kr = krNew
	setURL("nats://tok-51a0@nats.example.com/hooks.payments")
	setURL("nats://nats.example.net/hooks.payments") // another host: dropped
	check("nats://nats.example.net/hooks.payments", "")
	setURL("nats://tok-51a0@nats.example.com/hooks.payments")
	setURL("nats://@nats.example.com/hooks.payments") // @ alone: cleared
	check("nats://nats.example.com/hooks.payments", "")
}

// TestBrokerAuth: a broker endpoint takes no OAuth2 grant, and amqp://
// (without TLS) no client certificate; amqps:// and nats:// take one.
func TestBrokerAuth(t *testing.T) {
	kr := keyring(t)
	ca := testpki.NewCA(t, "ca")
	cert, key := ca.Client(t, "c", t0.Add(time.Hour))
	mtls := &controlv1.EndpointAuth{Mtls: &controlv1.MTLSAuth{ClientCertificate: cert, ClientKey: key}}
	grant := &controlv1.EndpointAuth{Oauth2: &controlv1.OAuth2Auth{TokenUrl: "https://auth.example.com/token", ClientId: "h", ClientSecret: "x"}}
	for _, tc := range []struct {
		url   string
		auth  *controlv1.EndpointAuth
		field string // "" when accepted
	}{
		{"amqps://mq.example.com/?exchange=hooks", mtls, ""},
		{"nats://nats.example.com/hooks.orders", mtls, ""},
		{"amqp://mq.example.com/?exchange=hooks", mtls, "settings.auth.mtls"},
		{"amqps://mq.example.com/?exchange=hooks", grant, "settings.auth.oauth2"},
		{"nats://nats.example.com/hooks.orders", grant, "settings.auth.oauth2"},
	} {
		s := &endpoint.State{}
		c := cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: tc.url, EventTypes: []string{"a"}, Auth: tc.auth}})
		_, err := s.Decide("ep_1", c, env(kr, t0, tc.url))
		var ce *command.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s with %v: %v, want accepted", tc.url, tc.auth, err)
		case tc.field != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("%s with %v: %v, want INVALID_ARGUMENT on %s", tc.url, tc.auth, err, tc.field)
		}
	}
}
