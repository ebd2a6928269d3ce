package endpoint

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// decideReseal seals each live secret that is not sealed under the
// keyring's current master key anew, under it: the same secret and
// ed25519 seed, the same version, so receivers and signatures see no
// change. One SecretResealed per secret, and one HeadersResealed for the
// secret headers and the OAuth2 client secret; none when all are current. A
// reseal that names another current key than this node's is refused: the
// nodes do not agree on the current key yet.
func (s *State) decideReseal(r *internalv1.Reseal, by *hooklinev1.Actor, env Env) (Decision, error) {
	current := env.Keyring.CurrentID()
	if want := r.GetKeyId(); want != "" && want != current {
		return Decision{}, command.FailedPrecondition("key_id", "the reseal seals under %s but this endpoint's node seals under %s: give every node the same current master key first", want, current)
	}
	at := timestamppb.New(env.Now)
	var evs []proto.Message
	for _, e := range s.Secrets {
		old := e.Sealed
		if old.GetMasterKeyId() == current {
			continue
		}
		internal := command.Internal("cannot reseal a secret: this node does not hold its master key; load that key into the keyring")
		key, err := env.Keyring.Open(old.GetMasterKeyId(), old.GetNonce(), old.GetCiphertext(), seal.SecretAAD(s.EndpointID, e.Version))
		if err != nil {
			return Decision{}, internal
		}
		keyID, nonce, ct, err := env.Keyring.Seal(key, seal.SecretAAD(s.EndpointID, e.Version))
		if err != nil {
			return Decision{}, internal
		}
		fresh := &hooklinev1.SealedSecret{Version: e.Version, MasterKeyId: keyID, Nonce: nonce, Ciphertext: ct}
		if len(old.GetEd25519SeedCiphertext()) > 0 {
			seed, err := env.Keyring.Open(old.GetMasterKeyId(), old.GetEd25519Nonce(), old.GetEd25519SeedCiphertext(), seal.SeedAAD(s.EndpointID, e.Version))
			if err != nil {
				return Decision{}, internal
			}
			_, fresh.Ed25519Nonce, fresh.Ed25519SeedCiphertext, err = env.Keyring.Seal(seed, seal.SeedAAD(s.EndpointID, e.Version))
			if err != nil {
				return Decision{}, internal
			}
		}
		evs = append(evs, &hooklinev1.SecretResealed{TenantId: s.TenantID, EndpointId: s.EndpointID, Secret: fresh, IssuedBy: by, At: at})
	}
	hr, err := s.resealSecretSettings(by, env)
	if err != nil {
		return Decision{}, err
	}
	if hr != nil {
		hr.At = at
		evs = append(evs, hr)
	}
	return Decision{Events: evs}, nil
}
