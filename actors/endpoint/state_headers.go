package endpoint

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// Headers returns the headers an attempt sends beside Hookline's own: the
// endpoint's plain headers and its secret headers, opened. The values of
// secret headers are secrets: never log them. The map is shared when the
// endpoint has no secret header; do not change it.
func (s *State) Headers(kr *seal.Keyring) (map[string]string, error) {
	sealed := s.Config.GetSealedHeaders()
	if len(sealed) == 0 {
		return s.Config.GetHeaders(), nil
	}
	out := maps.Clone(s.Config.GetHeaders())
	if out == nil {
		out = make(map[string]string, len(sealed))
	}
	for name, v := range sealed {
		plain, err := kr.Open(v.GetMasterKeyId(), v.GetNonce(), v.GetCiphertext(), seal.HeaderAAD(s.EndpointID, name))
		if err != nil {
			return nil, fmt.Errorf("open secret header %q of %s: %w", name, s.EndpointID, err)
		}
		out[name] = string(plain)
	}
	return out, nil
}

// OAuth2 returns the endpoint's OAuth2 grant with its client secret
// opened, and the key its tokens are cached under (the endpoint and its
// configuration version); nil when it has none. The secret is a secret:
// never log it.
func (s *State) OAuth2(kr *seal.Keyring) (*attempt.OAuth2, string, error) {
	g := s.Config.GetOauth2()
	if g == nil {
		return nil, "", nil
	}
	v := g.GetClientSecret()
	secret, err := kr.Open(v.GetMasterKeyId(), v.GetNonce(), v.GetCiphertext(), seal.OAuth2SecretAAD(s.EndpointID))
	if err != nil {
		return nil, "", fmt.Errorf("open the OAuth2 client secret of %s: %w", s.EndpointID, err)
	}
	return &attempt.OAuth2{
		TokenURL: g.GetTokenUrl(), ClientID: g.GetClientId(), ClientSecret: string(secret),
		Scopes: g.GetScopes(), Audience: g.GetAudience(),
	}, s.configKey(), nil
}

// configKey names the endpoint's configuration version: what the egress
// client caches tokens and client-certificate transports under.
func (s *State) configKey() string {
	return s.EndpointID + "/" + strconv.FormatInt(s.ConfigVersion, 10)
}

// ClientTLS returns the endpoint's client certificate with its key opened,
// cached under the endpoint and its configuration version; nil when it has
// none. The key is a secret: never log it.
func (s *State) ClientTLS(kr *seal.Keyring) (*attempt.ClientTLS, error) {
	m := s.Config.GetMtls()
	if m == nil {
		return nil, nil
	}
	v := m.GetClientKey()
	key, err := kr.Open(v.GetMasterKeyId(), v.GetNonce(), v.GetCiphertext(), seal.MTLSKeyAAD(s.EndpointID))
	if err != nil {
		return nil, fmt.Errorf("open the client certificate key of %s: %w", s.EndpointID, err)
	}
	return &attempt.ClientTLS{
		Key:         s.configKey(),
		Certificate: m.GetClientCertificate(), PrivateKey: string(key), CABundle: m.GetCaBundle(),
	}, nil
}

// sealValue seals value under the keyring's current master key with aad.
// When old already seals that value under the current key, it is kept,
// so that an update giving the same value changes nothing.
func sealValue(value string, aad []byte, old *hooklinev1.SealedValue, env Env) (*hooklinev1.SealedValue, error) {
	if old.GetMasterKeyId() == env.Keyring.CurrentID() {
		if plain, err := env.Keyring.Open(old.GetMasterKeyId(), old.GetNonce(), old.GetCiphertext(), aad); err == nil && string(plain) == value {
			return old, nil
		}
	}
	keyID, nonce, ct, err := env.Keyring.Seal([]byte(value), aad)
	if err != nil {
		return nil, command.Internal("cannot seal a secret setting; check that this node's keyring has a current master key")
	}
	return &hooklinev1.SealedValue{MasterKeyId: keyID, Nonce: nonce, Ciphertext: ct}, nil
}

// sealHeaders seals the values of headers, each bound to the endpoint and
// its name, keeping the sealings in old of unchanged values.
func sealHeaders(endpointID string, headers map[string]string, old map[string]*hooklinev1.SealedValue, env Env) (map[string]*hooklinev1.SealedValue, error) {
	if len(headers) == 0 {
		return nil, nil
	}
	out := make(map[string]*hooklinev1.SealedValue, len(headers))
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		v, err := sealValue(headers[name], seal.HeaderAAD(endpointID, name), old[name], env)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

// sealSecretSettings seals into cfg the secret settings of next: its
// secret headers when replaceHeaders (else cfg keeps those of old), and
// its OAuth2 client secret. A grant given without a client secret keeps
// old's when it names the same token URL and client id; otherwise the
// secret is required.
func sealSecretSettings(endpointID string, cfg, old *hooklinev1.EndpointConfig, next *settingsWithSecrets, replaceHeaders bool, env Env) error {
	cfg.SealedHeaders = old.GetSealedHeaders()
	if replaceHeaders {
		var err error
		if cfg.SealedHeaders, err = sealHeaders(endpointID, next.headers, old.GetSealedHeaders(), env); err != nil {
			return err
		}
	}
	if err := sealClientKey(endpointID, cfg.GetMtls(), old.GetMtls(), next.clientKey, env); err != nil {
		return err
	}
	g := cfg.GetOauth2()
	if g == nil {
		return nil
	}
	prev := old.GetOauth2()
	if next.clientSecret == "" {
		if prev == nil || prev.GetTokenUrl() != g.GetTokenUrl() || prev.GetClientId() != g.GetClientId() {
			return command.Invalid("settings.auth.oauth2.client_secret", "is required with a new token_url or client_id: give the client secret the token endpoint issued")
		}
		g.ClientSecret = prev.GetClientSecret()
		return nil
	}
	v, err := sealValue(next.clientSecret, seal.OAuth2SecretAAD(endpointID), prev.GetClientSecret(), env)
	g.ClientSecret = v
	return err
}

// sealClientKey seals into m the client certificate's key. A certificate
// given without its key keeps prev's when it is the same certificate;
// otherwise the key is required.
func sealClientKey(endpointID string, m, prev *hooklinev1.MTLSConfig, key string, env Env) error {
	if m == nil {
		return nil
	}
	if key == "" {
		if prev == nil || prev.GetClientCertificate() != m.GetClientCertificate() {
			return command.Invalid("settings.auth.mtls.client_key", "is required with a new client certificate: give the certificate's PEM private key")
		}
		m.ClientKey = prev.GetClientKey()
		return nil
	}
	v, err := sealValue(key, seal.MTLSKeyAAD(endpointID), prev.GetClientKey(), env)
	m.ClientKey = v
	return err
}

// settingsWithSecrets are the secret values of a command's settings,
// which the configuration holds only sealed.
type settingsWithSecrets struct {
	headers      map[string]string
	clientSecret string
	clientKey    string
}

// resealSecretSettings seals the endpoint's secret headers and OAuth2
// client secret anew under the current master key when one of them is
// sealed under another; nil when all are current.
func (s *State) resealSecretSettings(by *hooklinev1.Actor, env Env) (*hooklinev1.HeadersResealed, error) {
	current := env.Keyring.CurrentID()
	sealed := s.Config.GetSealedHeaders()
	stale := s.Config.GetOauth2() != nil && s.Config.GetOauth2().GetClientSecret().GetMasterKeyId() != current ||
		s.Config.GetMtls() != nil && s.Config.GetMtls().GetClientKey().GetMasterKeyId() != current ||
		s.Config.GetUrlPassword() != nil && s.Config.GetUrlPassword().GetMasterKeyId() != current
	for _, v := range sealed {
		stale = stale || v.GetMasterKeyId() != current
	}
	if !stale {
		return nil, nil
	}
	internal := command.Internal("cannot reseal a secret setting: this node does not hold its master key; load that key into the keyring")
	plain, err := s.Headers(env.Keyring)
	if err != nil {
		return nil, internal
	}
	values := make(map[string]string, len(sealed))
	for name := range sealed {
		values[name] = plain[name]
	}
	out := &hooklinev1.HeadersResealed{TenantId: s.TenantID, EndpointId: s.EndpointID, IssuedBy: by}
	if out.SealedHeaders, err = sealHeaders(s.EndpointID, values, nil, env); err != nil {
		return nil, err
	}
	grant, _, err := s.OAuth2(env.Keyring)
	if err != nil {
		return nil, internal
	}
	if grant != nil {
		if out.Oauth2ClientSecret, err = sealValue(grant.ClientSecret, seal.OAuth2SecretAAD(s.EndpointID), nil, env); err != nil {
			return nil, err
		}
	}
	ct, err := s.ClientTLS(env.Keyring)
	if err != nil {
		return nil, internal
	}
	if ct != nil {
		if out.MtlsClientKey, err = sealValue(ct.PrivateKey, seal.MTLSKeyAAD(s.EndpointID), nil, env); err != nil {
			return nil, err
		}
	}
	if password, err := s.URLPassword(env.Keyring); err != nil {
		return nil, internal
	} else if password != "" {
		if out.UrlPassword, err = sealValue(password, seal.URLPasswordAAD(s.EndpointID), nil, env); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// applyResealed applies a HeadersResealed to the configuration.
func (s *State) applyResealed(e *hooklinev1.HeadersResealed) {
	cfg := proto.CloneOf(s.Config)
	cfg.SealedHeaders = e.GetSealedHeaders()
	if v := e.GetOauth2ClientSecret(); v != nil && cfg.GetOauth2() != nil {
		cfg.Oauth2.ClientSecret = v
	}
	if v := e.GetMtlsClientKey(); v != nil && cfg.GetMtls() != nil {
		cfg.Mtls.ClientKey = v
	}
	if v := e.GetUrlPassword(); v != nil && cfg.GetUrlPassword() != nil {
		cfg.UrlPassword = v
	}
	s.Config = cfg
}
