package tenant

import (
	"io"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Limits on what a command may set.
const (
	MaxNameLen           = 200
	MaxAttemptsPerSecond = 1e6
	MaxInFlight          = 1_000_000
	MaxWeight            = 1000
	MaxEndpoints         = 1_000_000
)

// DefaultMaxEndpoints is a tenant's endpoint quota when its
// quota.max_endpoints is 0.
const DefaultMaxEndpoints = 1000

// MaxEndpointsOf returns the endpoints quota q allows: its max_endpoints,
// or DefaultMaxEndpoints when that is 0 (or q is nil).
func MaxEndpointsOf(q *hooklinev1.Quota) int {
	if n := q.GetMaxEndpoints(); n > 0 {
		return int(n)
	}
	return DefaultMaxEndpoints
}

// Decision is what a command decided: the events to append, in order (none
// for a read, or for a command that changes nothing), and, for an issued
// key, the key to show once.
type Decision struct {
	Events []proto.Message
	Key    *controlv1.IssueApiKeyResponse
}

// Decide validates cmd against s and returns the events it produces, without
// changing s. identity is the grain's tenant id; now stamps the events; rand
// supplies key material. A refused command gives a *[command.Error] and no events.
// Reads (get) and leases decide nothing: Decide returns an empty Decision for
// them once the tenant exists.
func (s *State) Decide(identity string, cmd *internalv1.TenantCommand, now time.Time, rand io.Reader) (Decision, error) {
	if !command.ValidID(identity) {
		return Decision{}, command.Invalid("tenant_id", "%q is not a tenant id: use 1 to 64 characters of [A-Za-z0-9_]", identity)
	}
	at := timestamppb.New(now)
	by, rid := cmd.GetIssuedBy(), cmd.GetRequestId()
	switch c := cmd.GetCommand().(type) {
	case *internalv1.TenantCommand_Create:
		r := c.Create
		if err := matchTenant(r.GetTenantId(), identity); err != nil {
			return Decision{}, err
		}
		if s.Created {
			return Decision{}, command.AlreadyExists("tenant_id", "tenant %s already exists; choose another tenant_id or leave it empty to get a new one", identity)
		}
		if err := checkName("name", r.GetName(), true); err != nil {
			return Decision{}, err
		}
		if err := checkQuota(r.GetQuota()); err != nil {
			return Decision{}, err
		}
		return Decision{Events: []proto.Message{&hooklinev1.TenantCreated{
			TenantId: identity, Name: r.GetName(), Quota: quotaOrZero(r.GetQuota()), IssuedBy: by, At: at, RequestId: rid,
		}}}, nil

	case *internalv1.TenantCommand_Get:
		return Decision{}, s.exists(identity, c.Get.GetTenantId())

	case *internalv1.TenantCommand_Lease:
		if err := s.exists(identity, ""); err != nil {
			return Decision{}, err
		}
		if c.Lease.GetEndpointId() == "" {
			return Decision{}, command.Invalid("endpoint_id", "is required: name the endpoint the lease is for")
		}
		return Decision{}, nil

	case *internalv1.TenantCommand_IssueKey:
		r := c.IssueKey
		if err := s.exists(identity, r.GetTenantId()); err != nil {
			return Decision{}, err
		}
		if err := checkName("name", r.GetName(), false); err != nil {
			return Decision{}, err
		}
		key, keyID, err := NewKey(rand)
		if err != nil {
			return Decision{}, command.Internal("cannot generate an api key")
		}
		return Decision{
			Events: []proto.Message{&hooklinev1.ApiKeyIssued{
				TenantId: identity, KeyId: keyID, KeySha256: HashKey(key), Name: r.GetName(), IssuedBy: by, At: at, RequestId: rid,
			}},
			Key: &controlv1.IssueApiKeyResponse{TenantId: identity, KeyId: keyID, ApiKey: key},
		}, nil

	case *internalv1.TenantCommand_RevokeKey:
		r := c.RevokeKey
		if err := s.exists(identity, r.GetTenantId()); err != nil {
			return Decision{}, err
		}
		if r.GetKeyId() == "" {
			return Decision{}, command.Invalid("key_id", "is required: give the id (key_…) of the key to revoke")
		}
		k := s.key(r.GetKeyId())
		if k == nil {
			return Decision{}, command.NotFound("key_id", "tenant %s has no api key %q", identity, r.GetKeyId())
		}
		if k.Revoked {
			return Decision{}, nil // already revoked: nothing to write
		}
		return Decision{Events: []proto.Message{&hooklinev1.ApiKeyRevoked{
			TenantId: identity, KeyId: k.ID, IssuedBy: by, At: at, RequestId: rid, Reason: hooklinev1.ApiKeyRevoked_REASON_REQUESTED,
		}}}, nil

	case *internalv1.TenantCommand_SetQuota:
		return s.decideSetQuota(identity, c.SetQuota, by, at, rid)

	case *internalv1.TenantCommand_PutEventType:
		if err := s.exists(identity, c.PutEventType.GetTenantId()); err != nil {
			return Decision{}, err
		}
		return s.decidePutEventType(identity, c.PutEventType, by, at, rid)

	case *internalv1.TenantCommand_Update:
		if err := s.exists(identity, c.Update.GetTenantId()); err != nil {
			return Decision{}, err
		}
		return s.decideUpdate(identity, c.Update, by, at, rid)

	case *internalv1.TenantCommand_Erase:
		return s.decideErase(identity, c.Erase, by, at, rid)
	}
	return Decision{}, command.Invalid("command", "is missing or unknown: set one of create, get, issue_key, revoke_key, set_quota, lease, put_event_type, update, erase")
}

// Reissue decides the answer to a retried IssueApiKeyRequest whose first
// run issued issued (its ApiKeyIssued, found by the request id) but whose
// answer was lost: nobody was shown that key, and the log holds only its
// hash, so it is revoked (REASON_UNSHOWN) and a new key is issued in its
// place, under the same request id, to be shown to the retry. A key
// revoked since is not revoked again.
func (s *State) Reissue(identity string, issued *hooklinev1.ApiKeyIssued, now time.Time, rand io.Reader) (Decision, error) {
	key, keyID, err := NewKey(rand)
	if err != nil {
		return Decision{}, command.Internal("cannot generate an api key")
	}
	at := timestamppb.New(now)
	var evs []proto.Message
	if k := s.key(issued.GetKeyId()); k != nil && !k.Revoked {
		evs = append(evs, &hooklinev1.ApiKeyRevoked{
			TenantId: identity, KeyId: k.ID, IssuedBy: issued.GetIssuedBy(), At: at, RequestId: issued.GetRequestId(),
			Reason: hooklinev1.ApiKeyRevoked_REASON_UNSHOWN,
		})
	}
	evs = append(evs, &hooklinev1.ApiKeyIssued{
		TenantId: identity, KeyId: keyID, KeySha256: HashKey(key), Name: issued.GetName(), IssuedBy: issued.GetIssuedBy(), At: at,
		RequestId: issued.GetRequestId(),
	})
	return Decision{Events: evs, Key: &controlv1.IssueApiKeyResponse{TenantId: identity, KeyId: keyID, ApiKey: key}}, nil
}

// exists refuses a command on a tenant that does not exist, or one whose
// tenant_id names another tenant (never saying whether that one exists).
func (s *State) exists(identity, requested string) error {
	if requested != "" && requested != identity {
		return command.NotFound("tenant_id", "tenant %q not found", requested)
	}
	if !s.Created {
		return command.NotFound("tenant_id", "tenant %q not found", identity)
	}
	return nil
}

func matchTenant(requested, identity string) error {
	if requested != "" && requested != identity {
		return command.Invalid("tenant_id", "%q does not match the tenant %q the command was sent to", requested, identity)
	}
	return nil
}

func checkName(field, name string, required bool) error {
	switch {
	case required && name == "":
		return command.Invalid(field, "is required: give a name people recognise")
	case !utf8.ValidString(name):
		return command.Invalid(field, "is not valid UTF-8")
	case len(name) > MaxNameLen:
		return command.Invalid(field, "is %d bytes long; use at most %d", len(name), MaxNameLen)
	}
	return nil
}

func checkQuota(q *hooklinev1.Quota) error {
	if q == nil {
		return nil
	}
	if a := q.GetAttemptsPerSecond(); math.IsNaN(a) || a < 0 || a > MaxAttemptsPerSecond {
		return command.Invalid("quota.attempts_per_second", "must be between 0 and %g (0 means the default)", float64(MaxAttemptsPerSecond))
	}
	if n := q.GetMaxInFlight(); n < 0 || n > MaxInFlight {
		return command.Invalid("quota.max_in_flight", "must be between 0 and %d (0 means the default)", MaxInFlight)
	}
	if w := q.GetWeight(); w < 0 || w > MaxWeight {
		return command.Invalid("quota.weight", "must be between 0 and %d (0 means 1)", MaxWeight)
	}
	if n := q.GetMaxEndpoints(); n < 0 || n > MaxEndpoints {
		return command.Invalid("quota.max_endpoints", "must be between 0 and %d (0 means the default, %d)", MaxEndpoints, DefaultMaxEndpoints)
	}
	return nil
}

// decideSetQuota replaces the tenant's quota.
func (s *State) decideSetQuota(identity string, r *controlv1.SetQuotaRequest, by *hooklinev1.Actor, at *timestamppb.Timestamp, rid string) (Decision, error) {
	if err := s.exists(identity, r.GetTenantId()); err != nil {
		return Decision{}, err
	}
	if r.GetQuota() == nil {
		return Decision{}, command.Invalid("quota", "is required: give the whole new quota (0 in a field means its default)")
	}
	if err := checkQuota(r.GetQuota()); err != nil {
		return Decision{}, err
	}
	if proto.Equal(r.GetQuota(), s.Quota) {
		return Decision{}, nil
	}
	return Decision{Events: []proto.Message{&hooklinev1.TenantQuotaChanged{
		TenantId: identity, Quota: proto.CloneOf(r.GetQuota()), IssuedBy: by, At: at, RequestId: rid,
	}}}, nil
}

// decideErase records the destruction of the tenant's data key. confirm
// must repeat the tenant id; a key already recorded as destroyed records
// nothing again.
func (s *State) decideErase(identity string, c *internalv1.EraseTenant, by *hooklinev1.Actor, at *timestamppb.Timestamp, rid string) (Decision, error) {
	r := c.GetRequest()
	if err := s.exists(identity, r.GetTenantId()); err != nil {
		return Decision{}, err
	}
	if r.GetConfirm() != identity {
		return Decision{}, command.Invalid("confirm", "is %q; erasure cannot be undone, so confirm must repeat the tenant id %q", r.GetConfirm(), identity)
	}
	id := c.GetDataKeyId()
	if id != "" && slices.Contains(s.ErasedKeys, id) {
		return Decision{}, nil
	}
	return Decision{Events: []proto.Message{&hooklinev1.TenantErased{
		TenantId: identity, DataKeyId: id, IssuedBy: by, At: at, RequestId: rid,
	}}}, nil
}
