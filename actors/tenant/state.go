package tenant

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// State is a tenant as its events describe it. It is rebuilt by applying
// the events of tenant-{tenant_id} in order with [State.Apply]. The zero
// value is a tenant that does not exist yet. A State is not safe for
// concurrent use; the grain owns it.
type State struct {
	// Created is set by TenantCreated.
	Created   bool
	TenantID  string
	Name      string
	Quota     *hooklinev1.Quota
	CreatedAt time.Time
	// Keys are the tenant's API keys in issue order, revoked ones included.
	Keys []APIKey
	// SchemaEnforcement and Retention are the tenant's settings
	// (TenantSettingsChanged); Retention 0 is the log's.
	SchemaEnforcement hooklinev1.SchemaEnforcement
	Retention         time.Duration
	// EventTypes is the catalog: the newest version of each type.
	EventTypes map[string]*hooklinev1.EventTypeDefined
	// ErasedKeys are the data keys destroyed (TenantErased), ErasedAt when
	// the last erasure was.
	ErasedKeys []string
	ErasedAt   time.Time
}

// APIKey is one API key of a tenant: never the key, only its hash.
type APIKey struct {
	ID        string
	Name      string
	SHA256    []byte
	CreatedAt time.Time
	Revoked   bool
	RevokedAt time.Time
}

// Apply folds one event into s. Events of other types are ignored, so that
// an older grain can read a stream written by a newer one.
func (s *State) Apply(msg proto.Message) {
	switch e := msg.(type) {
	case *hooklinev1.TenantCreated:
		s.Created = true
		s.TenantID = e.GetTenantId()
		s.Name = e.GetName()
		s.Quota = quotaOrZero(e.GetQuota())
		s.CreatedAt = e.GetAt().AsTime()
	case *hooklinev1.TenantQuotaChanged:
		s.Quota = quotaOrZero(e.GetQuota())
	case *hooklinev1.TenantSettingsChanged:
		s.SchemaEnforcement = e.GetSchemaEnforcement()
		s.Retention = time.Duration(e.GetRetentionSeconds()) * time.Second
	case *hooklinev1.TenantErased:
		if id := e.GetDataKeyId(); id != "" {
			s.ErasedKeys = append(s.ErasedKeys, id)
		}
		s.ErasedAt = e.GetAt().AsTime()
	case *hooklinev1.EventTypeDefined:
		if s.EventTypes == nil {
			s.EventTypes = map[string]*hooklinev1.EventTypeDefined{}
		}
		s.EventTypes[e.GetEventType()] = e
	case *hooklinev1.ApiKeyIssued:
		s.Keys = append(s.Keys, APIKey{
			ID:        e.GetKeyId(),
			Name:      e.GetName(),
			SHA256:    e.GetKeySha256(),
			CreatedAt: e.GetAt().AsTime(),
		})
	case *hooklinev1.ApiKeyRevoked:
		if k := s.key(e.GetKeyId()); k != nil {
			k.Revoked = true
			k.RevokedAt = e.GetAt().AsTime()
		}
	}
}

func quotaOrZero(q *hooklinev1.Quota) *hooklinev1.Quota {
	if q == nil {
		return &hooklinev1.Quota{}
	}
	return proto.CloneOf(q)
}

func (s *State) key(id string) *APIKey {
	for i := range s.Keys {
		if s.Keys[i].ID == id {
			return &s.Keys[i]
		}
	}
	return nil
}

// View returns the tenant as the control API shows it: no key hashes.
func (s *State) View() *controlv1.Tenant {
	t := &controlv1.Tenant{
		TenantId:  s.TenantID,
		Name:      s.Name,
		Quota:     proto.CloneOf(s.Quota),
		CreatedAt: timestamppb.New(s.CreatedAt),
		Settings:  &controlv1.TenantSettings{SchemaEnforcement: EnforcementName(s.SchemaEnforcement), Retention: retentionText(s.Retention)},
	}
	if !s.ErasedAt.IsZero() {
		t.ErasedAt = timestamppb.New(s.ErasedAt)
	}
	for _, k := range s.Keys {
		t.ApiKeys = append(t.ApiKeys, &controlv1.ApiKey{
			KeyId:     k.ID,
			Name:      k.Name,
			Revoked:   k.Revoked,
			CreatedAt: timestamppb.New(k.CreatedAt),
		})
	}
	return t
}

// retentionText shows a retention setting: "" for the log's.
func retentionText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
