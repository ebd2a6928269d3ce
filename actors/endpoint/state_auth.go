package endpoint

import (
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Limits on an endpoint's OAuth2 grant.
const (
	MaxOAuth2URLLen      = 2048
	MaxOAuth2ClientIDLen = 256
	MaxOAuth2SecretLen   = 1024
	MaxOAuth2Scopes      = 20
	MaxOAuth2ScopeLen    = 128
	MaxOAuth2AudienceLen = 512
)

// oauth2ConfigOf is the configuration of a grant, without its client
// secret, which is sealed apart; nil for none.
func oauth2ConfigOf(a *controlv1.OAuth2Auth) *hooklinev1.OAuth2Config {
	if a == nil {
		return nil
	}
	return &hooklinev1.OAuth2Config{
		TokenUrl: a.GetTokenUrl(), ClientId: a.GetClientId(),
		Scopes: slices.Clone(a.GetScopes()), Audience: a.GetAudience(),
	}
}

// authOf is the API's view of a grant: its client secret only said to be
// set.
func authOf(g *hooklinev1.OAuth2Config, m *hooklinev1.MTLSConfig) *controlv1.EndpointAuth {
	if g == nil && m == nil {
		return nil
	}
	out := &controlv1.EndpointAuth{}
	if g != nil {
		out.Oauth2 = &controlv1.OAuth2Auth{
			TokenUrl: g.GetTokenUrl(), ClientId: g.GetClientId(), Scopes: slices.Clone(g.GetScopes()),
			Audience: g.GetAudience(), ClientSecretSet: g.GetClientSecret() != nil,
		}
	}
	if m != nil {
		out.Mtls = &controlv1.MTLSAuth{ClientCertificate: m.GetClientCertificate(), CaBundle: m.GetCaBundle(), ClientKeySet: m.GetClientKey() != nil}
	}
	return out
}

// mtlsConfigOf is the configuration of a client certificate, without its
// key, which is sealed apart; nil for none.
func mtlsConfigOf(a *controlv1.MTLSAuth) *hooklinev1.MTLSConfig {
	if a == nil {
		return nil
	}
	return &hooklinev1.MTLSConfig{ClientCertificate: a.GetClientCertificate(), CaBundle: a.GetCaBundle()}
}

// secretsOf takes the secret values of settings.
func secretsOf(s *controlv1.EndpointSettings) *settingsWithSecrets {
	return &settingsWithSecrets{
		headers: s.GetSecretHeaders(), clientSecret: s.GetAuth().GetOauth2().GetClientSecret(),
		clientKey: s.GetAuth().GetMtls().GetClientKey(),
	}
}

// validateAuth checks the shape of an OAuth2 grant; whether its client
// secret may be left out depends on the endpoint's current grant, and is
// checked when it is sealed.
func validateAuth(s *controlv1.EndpointSettings, now time.Time) error {
	if (s.GetAuth().GetOauth2() != nil || s.GetAuth().GetMtls() != nil) && s.GetDelivery() == deliveryPull {
		return command.Invalid("settings.auth", "is set on a pull endpoint, which is sent nothing; leave it out")
	}
	scheme := ""
	if u, err := url.Parse(s.GetUrl()); err == nil {
		scheme = u.Scheme
	}
	if s.GetAuth().GetOauth2() != nil && attempt.IsBrokerScheme(scheme) {
		return command.Invalid("settings.auth.oauth2", "is set on a %s:// endpoint, which takes no bearer token; authenticate with the URL's user and password (sealed) or a client certificate", scheme)
	}
	if s.GetAuth().GetMtls() != nil && scheme == attempt.SchemeAMQP {
		return command.Invalid("settings.auth.mtls", "is set on an amqp:// endpoint, which does not use TLS; use amqps:// to present a client certificate")
	}
	if m := s.GetAuth().GetMtls(); m != nil {
		if err := attempt.CheckClientCertificate(m.GetClientCertificate(), m.GetClientKey(), m.GetCaBundle(), now); err != nil {
			return command.Invalid("settings.auth.mtls", "%v", err)
		}
	}
	g := s.GetAuth().GetOauth2()
	if g == nil {
		return nil
	}
	u, err := url.Parse(g.GetTokenUrl())
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" || len(g.GetTokenUrl()) > MaxOAuth2URLLen {
		return command.Invalid("settings.auth.oauth2.token_url", "must be an absolute https URL of at most %d characters, without credentials or fragment (the receiver's token endpoint)", MaxOAuth2URLLen)
	}
	if id := g.GetClientId(); id == "" || len(id) > MaxOAuth2ClientIDLen || !printable(id) {
		return command.Invalid("settings.auth.oauth2.client_id", "must be 1 to %d printable ASCII characters", MaxOAuth2ClientIDLen)
	}
	if cs := g.GetClientSecret(); len(cs) > MaxOAuth2SecretLen || !printable(cs) {
		return command.Invalid("settings.auth.oauth2.client_secret", "must be at most %d printable ASCII characters", MaxOAuth2SecretLen)
	}
	if len(g.GetScopes()) > MaxOAuth2Scopes {
		return command.Invalid("settings.auth.oauth2.scopes", "has %d entries; use at most %d", len(g.GetScopes()), MaxOAuth2Scopes)
	}
	for _, sc := range g.GetScopes() {
		if sc == "" || len(sc) > MaxOAuth2ScopeLen || !printable(sc) || strings.ContainsAny(sc, " \"\\") {
			return command.Invalid("settings.auth.oauth2.scopes", "entry %q must be 1 to %d printable ASCII characters without spaces, quotes or backslashes (RFC 6749 §3.3)", sc, MaxOAuth2ScopeLen)
		}
	}
	if a := g.GetAudience(); len(a) > MaxOAuth2AudienceLen || !printable(a) {
		return command.Invalid("settings.auth.oauth2.audience", "must be at most %d printable ASCII characters", MaxOAuth2AudienceLen)
	}
	names := slices.Concat(slices.Collect(maps.Keys(s.GetHeaders())), slices.Collect(maps.Keys(s.GetSecretHeaders())), s.GetSecretHeaderNames())
	if i := slices.IndexFunc(names, func(n string) bool { return strings.EqualFold(n, "Authorization") }); i >= 0 {
		return command.Invalid("settings.auth", "sets Authorization, which a static header sets too; remove the %q header or the grant", names[i])
	}
	return nil
}

// printable reports whether s is printable ASCII (space included).
func printable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) < 0
}
