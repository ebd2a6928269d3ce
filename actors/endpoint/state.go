package endpoint

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// State is an endpoint as its events describe it. It is rebuilt by applying
// the events of endpoint-{endpoint_id} in order with [State.Apply]. The zero
// value is an endpoint that does not exist yet. A State is not safe for
// concurrent use; the grain owns it.
type State struct {
	// Created is set by EndpointCreated and stays set after deletion.
	Created bool
	// Deleted is set by EndpointDeleted; a deleted endpoint answers
	// NOT_FOUND to everything but create, which answers ALREADY_EXISTS.
	Deleted       bool
	TenantID      string
	EndpointID    string
	ConfigVersion int64
	Config        *hooklinev1.EndpointConfig
	Status        controlv1.Endpoint_Status
	Circuit       controlv1.Endpoint_Circuit
	// CircuitUntil and CircuitCoolDown describe the last CircuitOpened: when
	// the breaker lets a probe through, and the cool-down that led there.
	CircuitUntil    time.Time
	CircuitCoolDown time.Duration
	// Secrets are the live signing secrets, sealed, oldest first; the last
	// one is the current secret.
	Secrets []SecretEntry
	// LastVersion is the highest secret version ever issued; retired
	// versions are never reused.
	LastVersion int32
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Recoveries are the last MaxRecoveries bulk recoveries, oldest first.
	Recoveries []Recovery
}

// SecretEntry is one live secret of an endpoint, as sealed in the log.
type SecretEntry struct {
	Version   int32
	Sealed    *hooklinev1.SealedSecret
	CreatedAt time.Time
	// ExpiresAt is set on a previous secret during a rotation overlap: the
	// grain retires it then.
	ExpiresAt time.Time
}

// Apply folds one event into s. Events of other types are ignored, so that
// an older grain can read a stream written by a newer one.
func (s *State) Apply(msg proto.Message) {
	switch e := msg.(type) {
	case *hooklinev1.EndpointCreated:
		s.Created = true
		s.TenantID = e.GetTenantId()
		s.EndpointID = e.GetEndpointId()
		s.ConfigVersion = e.GetConfigVersion()
		s.Config = proto.CloneOf(e.GetConfig())
		s.Status = controlv1.Endpoint_STATUS_ACTIVE
		s.Circuit = controlv1.Endpoint_CIRCUIT_CLOSED
		s.CreatedAt = e.GetAt().AsTime()
		s.Secrets = nil
		s.addSecret(e.GetSecret(), s.CreatedAt)
	case *hooklinev1.EndpointUpdated:
		s.ConfigVersion = e.GetConfigVersion()
		s.Config = proto.CloneOf(e.GetConfig())
		if ns := e.GetNewSecret(); ns != nil {
			if i := s.secretIndex(ns.GetVersion()); i >= 0 {
				s.Secrets[i].Sealed = proto.CloneOf(ns)
			} else {
				s.addSecret(ns, e.GetAt().AsTime())
			}
		}
	case *hooklinev1.SecretRotated:
		if i := s.secretIndex(e.GetPreviousVersion()); i >= 0 {
			s.Secrets[i].ExpiresAt = e.GetPreviousExpiresAt().AsTime()
		}
		s.addSecret(e.GetSecret(), e.GetAt().AsTime())
	case *hooklinev1.SecretResealed:
		if i := s.secretIndex(e.GetSecret().GetVersion()); i >= 0 {
			s.Secrets[i].Sealed = proto.CloneOf(e.GetSecret())
		}
	case *hooklinev1.HeadersResealed:
		s.applyResealed(e)
	case *hooklinev1.SecretRetired:
		if i := s.secretIndex(e.GetVersion()); i >= 0 {
			s.Secrets = slices.Delete(s.Secrets, i, i+1)
		}
	case *hooklinev1.EndpointPaused:
		s.Status = controlv1.Endpoint_STATUS_PAUSED
	case *hooklinev1.EndpointResumed:
		s.Status = controlv1.Endpoint_STATUS_ACTIVE
	case *hooklinev1.EndpointDisabled:
		s.Status = controlv1.Endpoint_STATUS_DISABLED
	case *hooklinev1.EndpointDeleted:
		s.Deleted = true
		s.Status = controlv1.Endpoint_STATUS_DELETED
	case *hooklinev1.CircuitOpened:
		s.Circuit = controlv1.Endpoint_CIRCUIT_OPEN
		s.CircuitUntil = e.GetUntil().AsTime()
		s.CircuitCoolDown = time.Duration(e.GetCoolDownMs()) * time.Millisecond
	case *hooklinev1.CircuitHalfOpened:
		s.Circuit = controlv1.Endpoint_CIRCUIT_HALF_OPEN
	case *hooklinev1.CircuitClosed:
		s.Circuit = controlv1.Endpoint_CIRCUIT_CLOSED
	case *hooklinev1.RecoveryStarted, *hooklinev1.RecoveryProgressed, *hooklinev1.RecoveryFinished:
		s.applyRecovery(msg)
		return // not a change of the endpoint's configuration
	default:
		return
	}
	if at, ok := msg.ProtoReflect().Interface().(interface{ GetAt() *timestamppb.Timestamp }); ok && at.GetAt() != nil {
		s.UpdatedAt = at.GetAt().AsTime()
	}
}

func (s *State) addSecret(sealed *hooklinev1.SealedSecret, at time.Time) {
	if sealed == nil {
		return
	}
	s.Secrets = append(s.Secrets, SecretEntry{Version: sealed.GetVersion(), Sealed: proto.CloneOf(sealed), CreatedAt: at})
	s.LastVersion = max(s.LastVersion, sealed.GetVersion())
}

func (s *State) secretIndex(version int32) int {
	return slices.IndexFunc(s.Secrets, func(e SecretEntry) bool { return e.Version == version })
}

// current returns the current secret, or nil when there is none.
func (s *State) current() *SecretEntry {
	if len(s.Secrets) == 0 {
		return nil
	}
	return &s.Secrets[len(s.Secrets)-1]
}

// rate returns the endpoint's token bucket: its own rate and burst, or
// the node's defaults.
func (s *State) rate(defaultRate float64, defaultBurst int) (perSecond float64, burst int) {
	perSecond, burst = s.Config.GetRatePerSecond(), int(s.Config.GetBurst())
	if perSecond <= 0 {
		perSecond = defaultRate
	}
	if burst <= 0 {
		burst = defaultBurst
	}
	return perSecond, burst
}

// Live reports whether the endpoint exists and is not deleted.
func (s *State) Live() bool { return s.Created && !s.Deleted }

// Settings returns the endpoint's configuration as the control API shows it.
func (s *State) Settings() *controlv1.EndpointSettings { return SettingsOf(s.Config) }

// View returns the endpoint as the control API shows it: the live secrets'
// versions and dates, never their values. The public key is not in it: it
// needs the keyring, see [State.PublicKey].
func (s *State) View() *controlv1.Endpoint {
	v := &controlv1.Endpoint{
		EndpointId:    s.EndpointID,
		TenantId:      s.TenantID,
		Settings:      s.Settings(),
		ConfigVersion: s.ConfigVersion,
		Status:        s.Status,
		Circuit:       s.Circuit,
		CreatedAt:     timestamppb.New(s.CreatedAt),
		UpdatedAt:     timestamppb.New(s.UpdatedAt),
	}
	for i := len(s.Secrets) - 1; i >= 0; i-- { // newest first
		e := s.Secrets[i]
		info := &controlv1.SecretInfo{Version: e.Version, CreatedAt: timestamppb.New(e.CreatedAt)}
		if !e.ExpiresAt.IsZero() {
			info.ExpiresAt = timestamppb.New(e.ExpiresAt)
		}
		v.Secrets = append(v.Secrets, info)
	}
	return v
}

// LiveSecrets opens the live signing secrets, newest first, for signing an
// attempt: during a rotation overlap there are several and each one signs.
// The grain retires a secret whose overlap has ended before it handles any
// command, so the list is current whenever the grain acts on it. The bytes
// are secret: never log them.
func (s *State) LiveSecrets(kr *seal.Keyring) ([]attempt.Secret, error) {
	out := make([]attempt.Secret, 0, len(s.Secrets))
	for i := len(s.Secrets) - 1; i >= 0; i-- {
		e := s.Secrets[i]
		key, err := kr.Open(e.Sealed.GetMasterKeyId(), e.Sealed.GetNonce(), e.Sealed.GetCiphertext(), seal.SecretAAD(s.EndpointID, e.Version))
		if err != nil {
			return nil, fmt.Errorf("open secret %d of %s: %w", e.Version, s.EndpointID, err)
		}
		out = append(out, attempt.Secret{Version: e.Version, Key: key})
	}
	return out, nil
}

// SigningKey opens the ed25519 seed of the current secret, for v1a
// signatures. It returns nil when sign_ed25519 is off or the current secret
// has no seed. The seed is secret: never log it.
func (s *State) SigningKey(kr *seal.Keyring) ([]byte, error) {
	cur := s.current()
	if !s.Config.GetSignEd25519() || cur == nil || len(cur.Sealed.GetEd25519SeedCiphertext()) == 0 {
		return nil, nil
	}
	seed, err := kr.Open(cur.Sealed.GetMasterKeyId(), cur.Sealed.GetEd25519Nonce(), cur.Sealed.GetEd25519SeedCiphertext(), seal.SeedAAD(s.EndpointID, cur.Version))
	if err != nil {
		return nil, fmt.Errorf("open ed25519 seed %d of %s: %w", cur.Version, s.EndpointID, err)
	}
	return seed, nil
}

// PublicKey returns the public key (whpk_…) that verifies the endpoint's v1a
// signatures, or "" when sign_ed25519 is off.
func (s *State) PublicKey(kr *seal.Keyring) (string, error) {
	seed, err := s.SigningKey(kr)
	if err != nil || seed == nil {
		return "", err
	}
	return attempt.PublicKey(seed), nil
}

// NextExpiry returns the earliest end of a rotation overlap, when a previous
// secret is still live.
func (s *State) NextExpiry() (time.Time, bool) {
	var next time.Time
	for _, e := range s.Secrets {
		if !e.ExpiresAt.IsZero() && (next.IsZero() || e.ExpiresAt.Before(next)) {
			next = e.ExpiresAt
		}
	}
	return next, !next.IsZero()
}

// RetireExpired returns the SecretRetired events (REASON_OVERLAP_ENDED,
// issued by the system) of the previous secrets whose overlap has ended at
// now; none for a deleted endpoint.
func (s *State) RetireExpired(now time.Time) []proto.Message {
	if !s.Live() {
		return nil
	}
	var out []proto.Message
	for _, e := range s.Secrets {
		if !e.ExpiresAt.IsZero() && !now.Before(e.ExpiresAt) {
			out = append(out, &hooklinev1.SecretRetired{
				TenantId:   s.TenantID,
				EndpointId: s.EndpointID,
				Version:    e.Version,
				Reason:     hooklinev1.SecretRetired_REASON_OVERLAP_ENDED,
				IssuedBy:   &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "secret-overlap"},
				At:         timestamppb.New(now),
			})
		}
	}
	return out
}

func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
