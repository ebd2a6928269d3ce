package endpoint

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hookline/hookline/actors/command"
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

// sealHeaders seals the values of headers under the keyring's current
// master key, each bound to the endpoint and its name. A header whose
// value is already sealed in old, under the current key, keeps that
// sealing, so that an update giving the same values changes nothing.
func sealHeaders(endpointID string, headers map[string]string, old map[string]*hooklinev1.SealedValue, env Env) (map[string]*hooklinev1.SealedValue, error) {
	if len(headers) == 0 {
		return nil, nil
	}
	out := make(map[string]*hooklinev1.SealedValue, len(headers))
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		aad := seal.HeaderAAD(endpointID, name)
		if o := old[name]; o.GetMasterKeyId() == env.Keyring.CurrentID() {
			if plain, err := env.Keyring.Open(o.GetMasterKeyId(), o.GetNonce(), o.GetCiphertext(), aad); err == nil && string(plain) == headers[name] {
				out[name] = o
				continue
			}
		}
		keyID, nonce, ct, err := env.Keyring.Seal([]byte(headers[name]), aad)
		if err != nil {
			return nil, command.Internal("cannot seal a secret header; check that this node's keyring has a current master key")
		}
		out[name] = &hooklinev1.SealedValue{MasterKeyId: keyID, Nonce: nonce, Ciphertext: ct}
	}
	return out, nil
}

// resealHeaders seals the endpoint's secret headers anew under the current
// master key when one of them is sealed under another; nil when all are
// current.
func (s *State) resealHeaders(by *hooklinev1.Actor, env Env) (*hooklinev1.HeadersResealed, error) {
	sealed := s.Config.GetSealedHeaders()
	stale := false
	for _, v := range sealed {
		stale = stale || v.GetMasterKeyId() != env.Keyring.CurrentID()
	}
	if !stale {
		return nil, nil
	}
	plain, err := s.Headers(env.Keyring)
	if err != nil {
		return nil, command.Internal("cannot reseal a secret header: this node does not hold its master key; load that key into the keyring")
	}
	values := make(map[string]string, len(sealed))
	for name := range sealed {
		values[name] = plain[name]
	}
	fresh, err := sealHeaders(s.EndpointID, values, nil, env)
	if err != nil {
		return nil, err
	}
	return &hooklinev1.HeadersResealed{TenantId: s.TenantID, EndpointId: s.EndpointID, SealedHeaders: fresh, IssuedBy: by}, nil
}
