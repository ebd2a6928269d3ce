package endpoint

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// Secret rotation limits.
const (
	DefaultOverlap = 24 * time.Hour
	MaxOverlap     = 30 * 24 * time.Hour
	MaxLiveSecrets = 5
)

// Env is what a decision needs besides the state and the command: the
// clock, key material and the egress policy's verdict on the command's URL.
type Env struct {
	Now  time.Time
	Rand io.Reader
	// Keyring seals new secrets.
	Keyring *seal.Keyring
	// URL is the policy's verdict on the URL that [State.URLToCheck] named;
	// zero when it named none.
	URL URLVerdict
	// DefaultOverlap replaces a rotation's overlap_seconds of 0; 0 means
	// [DefaultOverlap] (24 h).
	DefaultOverlap time.Duration
}

// URLVerdict is the egress policy's answer on one URL.
type URLVerdict struct {
	// Raw is the URL checked, as the command gave it.
	Raw string
	// Normalised is the URL to store when Err is nil.
	Normalised string
	// Err is the policy's refusal (errors.Is attempt.ErrBlocked), a
	// resolution failure (attempt.ErrResolve) or another error.
	Err error
}

// Decision is what a command decided: the events to append, in order (none
// for a read, or for a command that changes nothing), and the new signing
// secret to show once (create, rotate).
type Decision struct {
	Events []proto.Message
	Secret string
}

// URLToCheck returns the URL that cmd would store and that the egress
// policy must check before [State.Decide], or "" when it stores none.
func (s *State) URLToCheck(cmd *internalv1.EndpointCommand) string {
	switch c := cmd.GetCommand().(type) {
	case *internalv1.EndpointCommand_Create:
		return c.Create.GetSettings().GetUrl()
	case *internalv1.EndpointCommand_Update:
		if !s.Live() || !maskTouches(c.Update.GetSettings(), c.Update.GetUpdateMask().GetPaths(), "url") {
			return ""
		}
		next, err := ApplyMask(s.Settings(), c.Update.GetSettings(), c.Update.GetUpdateMask().GetPaths())
		if err != nil || next.GetUrl() == s.Config.GetUrl() {
			return ""
		}
		return next.GetUrl()
	}
	return ""
}

// Decide validates cmd against s and returns the events it produces, without
// changing s. identity is the grain's endpoint id. A refused command gives a
// *[command.Error] and no events.
//
// Isolation: a command whose tenant differs from the endpoint's answers
// NOT_FOUND, as for an endpoint that does not exist. Deletion: a deleted
// endpoint answers NOT_FOUND to every command but create, which answers
// ALREADY_EXISTS (endpoint ids are never reused).
func (s *State) Decide(identity string, cmd *internalv1.EndpointCommand, env Env) (Decision, error) {
	if !command.ValidID(identity) {
		return Decision{}, command.Invalid("endpoint_id", "%q is not an endpoint id: use 1 to 64 characters of [A-Za-z0-9_]", identity)
	}
	tenantID := cmd.GetTenantId()
	if tenantID == "" {
		return Decision{}, command.Invalid("tenant_id", "is required: the command must name the caller's tenant")
	}
	if _, wake := cmd.GetCommand().(*internalv1.EndpointCommand_Wake); wake {
		return Decision{}, nil
	}
	req := innerRequest(cmd)
	if req == nil {
		return Decision{}, command.Invalid("command", "is missing or unknown: set one of create, get, update, rotate, retire, pause, resume, delete")
	}
	if t := req.GetTenantId(); t != "" && t != tenantID {
		return Decision{}, command.NotFound("endpoint_id", "endpoint %q not found", identity)
	}
	if id := req.GetEndpointId(); id != "" && id != identity {
		return Decision{}, command.Invalid("endpoint_id", "%q does not match the endpoint %q the command was sent to", id, identity)
	}
	rid := cmd.GetRequestId()
	if create := cmd.GetCreate(); create != nil {
		return s.decideCreate(identity, tenantID, cmd.GetIssuedBy(), rid, create, env)
	}
	if !s.Live() || s.TenantID != tenantID {
		return Decision{}, command.NotFound("endpoint_id", "endpoint %q not found", identity)
	}
	at := timestamppb.New(env.Now)
	by := cmd.GetIssuedBy()
	switch c := cmd.GetCommand().(type) {
	case *internalv1.EndpointCommand_Get:
		return Decision{}, nil
	case *internalv1.EndpointCommand_Update:
		return s.decideUpdate(c.Update, by, rid, env)
	case *internalv1.EndpointCommand_Rotate:
		return s.decideRotate(c.Rotate, by, rid, env)
	case *internalv1.EndpointCommand_Retire:
		v := c.Retire.GetVersion()
		if v == 0 {
			return Decision{}, command.Invalid("version", "is required: give the version of the secret to retire")
		}
		i := s.secretIndex(v)
		if i < 0 {
			return Decision{}, command.NotFound("version", "endpoint %s has no live secret of version %d", identity, v)
		}
		if i == len(s.Secrets)-1 {
			return Decision{}, command.FailedPrecondition("version", "secret %d is the current secret; rotate first, then retire the previous one", v)
		}
		return Decision{Events: []proto.Message{&hooklinev1.SecretRetired{
			TenantId: s.TenantID, EndpointId: identity, Version: v,
			Reason: hooklinev1.SecretRetired_REASON_REQUESTED, IssuedBy: by, At: at, RequestId: rid,
		}}}, nil
	case *internalv1.EndpointCommand_Pause:
		switch s.Status {
		case controlv1.Endpoint_STATUS_PAUSED:
			return Decision{}, nil
		case controlv1.Endpoint_STATUS_DISABLED:
			return Decision{}, command.FailedPrecondition("", "endpoint %s is disabled; resume it to enable it again", identity)
		}
		return Decision{Events: []proto.Message{&hooklinev1.EndpointPaused{
			TenantId: s.TenantID, EndpointId: identity, Reason: hooklinev1.EndpointPaused_REASON_REQUESTED, IssuedBy: by, At: at, RequestId: rid,
		}}}, nil
	case *internalv1.EndpointCommand_Resume:
		if s.Status == controlv1.Endpoint_STATUS_ACTIVE {
			return Decision{}, nil
		}
		return Decision{Events: []proto.Message{&hooklinev1.EndpointResumed{
			TenantId: s.TenantID, EndpointId: identity, IssuedBy: by, At: at, RequestId: rid,
		}}}, nil
	case *internalv1.EndpointCommand_Delete:
		return Decision{Events: []proto.Message{&hooklinev1.EndpointDeleted{
			TenantId: s.TenantID, EndpointId: identity, IssuedBy: by, At: at, RequestId: rid,
		}}}, nil
	case *internalv1.EndpointCommand_Reseal:
		return s.decideReseal(c.Reseal, by, env)
	case *internalv1.EndpointCommand_Replay, *internalv1.EndpointCommand_Recover, *internalv1.EndpointCommand_GetRecovery,
		*internalv1.EndpointCommand_ListRecoveries, *internalv1.EndpointCommand_ListOrderingKeys, *internalv1.EndpointCommand_SkipOrderingKey,
		*internalv1.EndpointCommand_Pull, *internalv1.EndpointCommand_Ack:
		// The delivery loop carries these out; without it (Config.Due
		// unset) the grain only keeps the endpoint's configuration.
		return Decision{}, command.FailedPrecondition("", "replay and recovery need the delivery loop, which this node does not run; send them to a node that serves deliveries")
	}
	return Decision{}, command.Invalid("command", "is missing or unknown: set one of create, get, update, rotate, retire, pause, resume, delete")
}

// innerRequest returns the request inside cmd's oneof (for its tenant and
// endpoint ids), or nil.
func innerRequest(cmd *internalv1.EndpointCommand) interface {
	GetTenantId() string
	GetEndpointId() string
} {
	switch c := cmd.GetCommand().(type) {
	case *internalv1.EndpointCommand_Create:
		return c.Create
	case *internalv1.EndpointCommand_Get:
		return c.Get
	case *internalv1.EndpointCommand_Update:
		return c.Update
	case *internalv1.EndpointCommand_Rotate:
		return c.Rotate
	case *internalv1.EndpointCommand_Retire:
		return c.Retire
	case *internalv1.EndpointCommand_Pause:
		return c.Pause
	case *internalv1.EndpointCommand_Resume:
		return c.Resume
	case *internalv1.EndpointCommand_Delete:
		return c.Delete
	case *internalv1.EndpointCommand_Recover:
		return c.Recover
	case *internalv1.EndpointCommand_GetRecovery:
		return c.GetRecovery
	case *internalv1.EndpointCommand_ListRecoveries:
		return c.ListRecoveries
	case *internalv1.EndpointCommand_ListOrderingKeys:
		return c.ListOrderingKeys
	case *internalv1.EndpointCommand_SkipOrderingKey:
		return c.SkipOrderingKey
	case *internalv1.EndpointCommand_Pull:
		return c.Pull
	case *internalv1.EndpointCommand_Ack:
		return c.Ack
	case *internalv1.EndpointCommand_Replay:
		return replayIDs{c.Replay}
	case *internalv1.EndpointCommand_Reseal:
		return c.Reseal
	}
	return nil
}

// replayIDs adapts ReplayDeliveryRequest, which names a delivery, not an
// endpoint.
type replayIDs struct {
	r *controlv1.ReplayDeliveryRequest
}

func (r replayIDs) GetTenantId() string   { return r.r.GetTenantId() }
func (r replayIDs) GetEndpointId() string { return "" }

func (s *State) decideCreate(identity, tenantID string, by *hooklinev1.Actor, rid string, r *controlv1.CreateEndpointRequest, env Env) (Decision, error) {
	if s.Created {
		return Decision{}, command.AlreadyExists("endpoint_id", "endpoint id %q is taken; choose another or leave endpoint_id empty to get a new one", identity)
	}
	settings := r.GetSettings()
	if err := validateSettings(settings, env.Now); err != nil {
		return Decision{}, err
	}
	u, err := checkedURL(settings.GetUrl(), env.URL)
	if err != nil {
		return Decision{}, err
	}
	cfg := configOf(settings)
	cfg.Url = u
	if err := sealURLPassword(identity, cfg, nil, env); err != nil {
		return Decision{}, err
	}
	if err := sealSecretSettings(identity, cfg, nil, secretsOf(settings), true, env); err != nil {
		return Decision{}, err
	}
	secret, sealed, err := newSealedSecret(identity, 1, cfg.GetSignEd25519(), env)
	if err != nil {
		return Decision{}, err
	}
	return Decision{
		Events: []proto.Message{&hooklinev1.EndpointCreated{
			TenantId: tenantID, EndpointId: identity, ConfigVersion: 1, Config: cfg,
			Secret: sealed, IssuedBy: by, At: timestamppb.New(env.Now), RequestId: rid,
		}},
		Secret: secret,
	}, nil
}

func (s *State) decideUpdate(r *controlv1.UpdateEndpointRequest, by *hooklinev1.Actor, rid string, env Env) (Decision, error) {
	paths := r.GetUpdateMask().GetPaths()
	next, err := ApplyMask(s.Settings(), r.GetSettings(), paths)
	if err != nil {
		return Decision{}, err
	}
	// Secret headers are never read back: the update replaces them when
	// it names them, and keeps the sealed ones otherwise.
	replaceSecret := maskTouches(r.GetSettings(), paths, "secret_headers")
	next.SecretHeaderNames = nil
	if !replaceSecret {
		next.SecretHeaders = nil
		next.SecretHeaderNames = slices.Sorted(maps.Keys(s.Config.GetSealedHeaders()))
	}
	if err := validateSettings(next, env.Now); err != nil {
		return Decision{}, err
	}
	cfg := configOf(next)
	if err := sealSecretSettings(s.EndpointID, cfg, s.Config, secretsOf(next), replaceSecret, env); err != nil {
		return Decision{}, err
	}
	if cfg.GetUrl() != s.Config.GetUrl() {
		u, err := checkedURL(cfg.GetUrl(), env.URL)
		if err != nil {
			return Decision{}, err
		}
		cfg.Url = u
	}
	if err := checkSecretsFollowURL(s.Config, cfg, replaceSecret, secretsOf(next).clientSecret != ""); err != nil {
		return Decision{}, err
	}
	if err := sealURLPassword(s.EndpointID, cfg, s.Config, env); err != nil {
		return Decision{}, err
	}
	if proto.Equal(cfg, s.Config) {
		return Decision{}, nil // nothing changes: nothing written
	}
	ev := &hooklinev1.EndpointUpdated{
		TenantId: s.TenantID, EndpointId: s.EndpointID, ConfigVersion: s.ConfigVersion + 1,
		Config: cfg, IssuedBy: by, At: timestamppb.New(env.Now), RequestId: rid,
	}
	if cur := s.current(); cfg.GetSignEd25519() && cur != nil && len(cur.Sealed.GetEd25519SeedCiphertext()) == 0 {
		// Turning ed25519 on: the current secret gets a seed, resealed with
		// its HMAC key under the current master key, same version.
		key, err := env.Keyring.Open(cur.Sealed.GetMasterKeyId(), cur.Sealed.GetNonce(), cur.Sealed.GetCiphertext(), seal.SecretAAD(s.EndpointID, cur.Version))
		if err != nil {
			return Decision{}, command.Internal("cannot open the current secret to add an ed25519 key; give this node the master key that sealed it")
		}
		ev.NewSecret, err = sealSecret(s.EndpointID, cur.Version, key, true, env)
		if err != nil {
			return Decision{}, err
		}
	}
	return Decision{Events: []proto.Message{ev}}, nil
}

func (s *State) decideRotate(r *controlv1.RotateSecretRequest, by *hooklinev1.Actor, rid string, env Env) (Decision, error) {
	overlap := time.Duration(r.GetOverlapSeconds()) * time.Second
	switch {
	case r.GetOverlapSeconds() < 0 || overlap > MaxOverlap:
		return Decision{}, command.Invalid("overlap_seconds", "must be between 0 and %d (0 means %v)", int64(MaxOverlap/time.Second), DefaultOverlap)
	case overlap == 0 && env.DefaultOverlap > 0:
		overlap = env.DefaultOverlap
	case overlap == 0:
		overlap = DefaultOverlap
	}
	if len(s.Secrets) >= MaxLiveSecrets {
		return Decision{}, command.FailedPrecondition("", "endpoint %s has %d live secrets; retire an old one first", s.EndpointID, len(s.Secrets))
	}
	version := s.LastVersion + 1
	secret, sealed, err := newSealedSecret(s.EndpointID, version, s.Config.GetSignEd25519(), env)
	if err != nil {
		return Decision{}, err
	}
	ev := &hooklinev1.SecretRotated{
		TenantId: s.TenantID, EndpointId: s.EndpointID, Secret: sealed,
		IssuedBy: by, At: timestamppb.New(env.Now), RequestId: rid,
	}
	if cur := s.current(); cur != nil {
		ev.PreviousVersion = cur.Version
		ev.PreviousExpiresAt = timestamppb.New(env.Now.Add(overlap))
	}
	return Decision{Events: []proto.Message{ev}, Secret: secret}, nil
}

// checkedURL returns the normalised URL for raw from the policy's verdict.
func checkedURL(raw string, v URLVerdict) (string, error) {
	if v.Raw != raw {
		return "", command.Internal("the url was not checked against the egress policy")
	}
	var pe *attempt.PolicyError
	switch {
	case v.Err == nil:
		return v.Normalised, nil
	case errors.As(v.Err, &pe):
		return "", command.Invalid("settings.url", "%s", pe.Detail)
	case errors.Is(v.Err, attempt.ErrResolve):
		return "", command.Invalid("settings.url", "the host does not resolve: check the host name (%v)", v.Err)
	case errors.Is(v.Err, context.DeadlineExceeded), errors.Is(v.Err, context.Canceled):
		return "", command.Unavailable("settings.url", "checking the url timed out; retry")
	}
	return "", command.Invalid("settings.url", "%v", v.Err)
}

// newSealedSecret generates a signing secret (and an ed25519 seed when
// withSeed) and seals it for the endpoint and version.
func newSealedSecret(endpointID string, version int32, withSeed bool, env Env) (string, *hooklinev1.SealedSecret, error) {
	secret, err := attempt.NewSecret(env.Rand)
	if err != nil {
		return "", nil, command.Internal("cannot generate a secret from the random source; retry")
	}
	key, err := attempt.ParseSecret(secret)
	if err != nil {
		return "", nil, command.Internal("cannot generate a secret from the random source; retry")
	}
	sealed, err := sealSecret(endpointID, version, key, withSeed, env)
	if err != nil {
		return "", nil, err
	}
	return secret, sealed, nil
}

func sealSecret(endpointID string, version int32, key []byte, withSeed bool, env Env) (*hooklinev1.SealedSecret, error) {
	internal := command.Internal("cannot seal a secret; check that this node's keyring has a current master key")
	keyID, nonce, ct, err := env.Keyring.Seal(key, seal.SecretAAD(endpointID, version))
	if err != nil {
		return nil, internal
	}
	out := &hooklinev1.SealedSecret{Version: version, MasterKeyId: keyID, Nonce: nonce, Ciphertext: ct}
	if withSeed {
		seed, err := attempt.NewSigningKey(env.Rand)
		if err != nil {
			return nil, internal
		}
		seedKeyID, seedNonce, seedCT, err := env.Keyring.Seal(seed, seal.SeedAAD(endpointID, version))
		if err != nil || seedKeyID != keyID {
			return nil, internal
		}
		out.Ed25519Nonce, out.Ed25519SeedCiphertext = seedNonce, seedCT
	}
	return out, nil
}
