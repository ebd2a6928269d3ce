package registry

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/eventtype"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Name is the registry's projection name; renaming it rebuilds it. It
// became "registry.v2" when it began to list every endpoint of a tenant,
// deleted ones included (TenantEndpointIDs): a store of before is rebuilt
// from the log.
const Name = "registry.v2"

// AllTypes is the event type that subscribes an endpoint to every type. An
// endpoint whose event types are empty, or include AllTypes, gets them all
// (the operational types excepted: package eventtype has the rule).
const AllTypes = eventtype.All

// ErrBadCursor means a ListEndpoints cursor was not made by ListEndpoints.
var ErrBadCursor = errors.New("registry: malformed cursor")

// Tenant is a tenant as the registry knows it.
type Tenant struct {
	ID        string
	Name      string
	Quota     Quota
	CreatedAt time.Time
	// SchemaEnforcement is the tenant's setting; 0 (off) until set.
	SchemaEnforcement hooklinev1.SchemaEnforcement `json:",omitempty"`
	// Retention is the tenant's own, shorter than the log's; 0: the log's.
	Retention time.Duration `json:",omitempty"`
	// ErasedKeys are the ids of the tenant's data keys destroyed
	// (TenantErased), ErasedAt when the last was.
	ErasedKeys []string  `json:",omitempty"`
	ErasedAt   time.Time `json:",omitzero"`
}

// Quota is a tenant's share of the fleet; zero fields mean the defaults.
type Quota struct {
	AttemptsPerSecond float64
	MaxInFlight       int32
	Weight            int32
}

// Endpoint is an endpoint's current registration.
type Endpoint struct {
	ID       string
	TenantID string
	// ConfigVersion numbers Config; every update makes a new one.
	ConfigVersion int64
	Config        *hooklinev1.EndpointConfig
	// SecretVersions are the live signing secrets' versions, oldest first.
	SecretVersions []int32
	// Paused is set by EndpointPaused and cleared by EndpointResumed.
	Paused      bool
	PauseReason hooklinev1.EndpointPaused_Reason
	// Disabled is set by EndpointDisabled and cleared by EndpointResumed.
	Disabled       bool
	DisabledReason string
	// Deleted is final.
	Deleted   bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// EndpointRef is what publish needs of an endpoint to plan a delivery.
type EndpointRef struct {
	ID            string
	ConfigVersion int64
	// Paused endpoints still get deliveries planned; they wait in the due
	// index until the endpoint resumes.
	Paused bool
	// Filter is the endpoint's filter at ConfigVersion (a CEL expression,
	// see package filter); empty passes every event.
	Filter string `json:",omitempty"`
	// Ordering is the endpoint's ordering by key at ConfigVersion.
	Ordering hooklinev1.KeyOrdering `json:",omitempty"`
}

// Registry is the projection of tenants, API keys and endpoints. Register it
// with a [projections.Runner] through [New]; queries are safe for concurrent
// use with the runner. The hot ones (a tenant, a key's tenant, the
// endpoints of an event type: every call, publish and dispatch asks them)
// are answered from memory until the registry changes: a generation bumped
// after every batch that changed it, before the runner's WaitFor returns.
type Registry struct {
	store *projections.Store
	gen   atomic.Uint64 // bumped after each batch that changed the registry

	mu    sync.Mutex // guards cache
	cache map[string]cached

	schemas schemaCache
}

// cached is one query's answer as of a generation.
type cached struct {
	gen uint64
	v   any
}

// maxCached bounds the answers kept: beyond it the cache starts over.
const maxCached = 100_000

// remembered returns the answer to query key, from memory when the
// registry has not changed since it was read, else from fill. The
// generation is read before the store, so an answer read across a change
// is kept under the older generation and never served after it.
func (r *Registry) remembered(key string, fill func() (any, bool, error)) (any, bool, error) {
	g := r.gen.Load()
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && c.gen == g {
		return c.v, true, nil
	}
	v, ok, err := fill()
	if err != nil || !ok {
		return v, ok, err // absent answers are not kept: anyone can ask for any key
	}
	r.mu.Lock()
	if len(r.cache) >= maxCached {
		clear(r.cache)
	}
	r.cache[key] = cached{gen: g, v: v}
	r.mu.Unlock()
	return v, true, nil
}

// New registers a Registry with r.
func New(r *projections.Runner) (*Registry, error) {
	reg := &Registry{cache: map[string]cached{}}
	return projections.Registered(r, reg, func(s *projections.Store) { reg.store = s })
}

// Name implements [projections.Projection].
func (*Registry) Name() string { return Name }

// Filter implements [projections.Projection].
func (*Registry) Filter() events.Filter {
	return events.Filter{
		StreamPrefixes: []string{events.TenantCategory + "-", events.EndpointCategory + "-"},
		Types: []string{
			"TenantCreated", "TenantQuotaChanged", "ApiKeyIssued", "ApiKeyRevoked",
			"TenantSettingsChanged", "EventTypeDefined", "TenantErased",
			"EndpointCreated", "EndpointUpdated", "SecretRotated", "SecretRetired",
			"EndpointPaused", "EndpointResumed", "EndpointDisabled", "EndpointDeleted",
			"RecoveryStarted", "RecoveryFinished",
		},
	}
}

// Tenant returns a tenant; ok is false when it does not exist.
func (r *Registry) Tenant(id string) (t Tenant, ok bool, err error) {
	v, ok, err := r.remembered("t\x00"+id, func() (any, bool, error) {
		var t Tenant
		ok, err := r.load(tenantKey(id), &t)
		return t, ok, err
	})
	if err != nil {
		return Tenant{}, false, fmt.Errorf("tenant %s: %w", id, err)
	}
	if !ok {
		return Tenant{}, false, nil
	}
	return v.(Tenant), true, nil
}

// DataKeyErased reports whether the log records the destruction of the
// tenant's data key id (a failed read counts as not erased: the vault,
// which no longer holds an erased key, still refuses it).
func (r *Registry) DataKeyErased(tenantID, id string) bool {
	t, ok, err := r.Tenant(tenantID)
	return err == nil && ok && slices.Contains(t.ErasedKeys, id)
}

// TenantByKeyHash authenticates an API key by its SHA-256: ok is false when
// no live (unrevoked) key has that hash.
func (r *Registry) TenantByKeyHash(hash []byte) (tenantID, keyID string, ok bool, err error) {
	v, ok, err := r.remembered("k\x00"+string(hash), func() (any, bool, error) {
		var k apiKey
		ok, err := r.load(keyHashKey(hash), &k)
		return k, ok, err
	})
	if err != nil || !ok {
		return "", "", false, err
	}
	k := v.(apiKey)
	return k.TenantID, k.KeyID, true, nil
}

// Endpoint returns an endpoint, deleted ones included; ok is false when it
// was never created.
func (r *Registry) Endpoint(id string) (e Endpoint, ok bool, err error) {
	var rec endpointRecord
	ok, err = r.load(endpointKey(id), &rec)
	if err != nil || !ok {
		return Endpoint{}, false, err
	}
	e, err = rec.endpoint()
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("endpoint %s: %w", id, err)
	}
	return e, true, nil
}

// EndpointsForType returns the tenant's endpoints that subscribe to
// eventType, deleted and disabled ones excluded, paused ones included, by
// id: those that name it, those whose prefix pattern matches it (order.*
// for order.paid) and those subscribed to [AllTypes], by the rule of
// [eventtype.Patterns].
func (r *Registry) EndpointsForType(tenantID, eventType string) ([]EndpointRef, error) {
	return r.rememberedRefs("y\x00"+tenantID+"\x00"+eventType, func() ([]EndpointRef, error) {
		return r.endpointsForType(tenantID, eventType)
	})
}

// EndpointsNaming returns the tenant's endpoints that name eventType among
// their event types, by id: EndpointsForType without the endpoints that
// get every type through [AllTypes]. Operational events (package
// operational) go only to the endpoints that name them.
func (r *Registry) EndpointsNaming(tenantID, eventType string) ([]EndpointRef, error) {
	return r.rememberedRefs("n\x00"+tenantID+"\x00"+eventType, func() ([]EndpointRef, error) {
		return r.refs(tenantID, eventType)
	})
}

// rememberedRefs is [Registry.remembered] for a list of endpoints, of which
// the caller gets its own copy.
func (r *Registry) rememberedRefs(key string, fill func() ([]EndpointRef, error)) ([]EndpointRef, error) {
	v, _, err := r.remembered(key, func() (any, bool, error) {
		refs, err := fill()
		return refs, true, err
	})
	if err != nil {
		return nil, err
	}
	return slices.Clone(v.([]EndpointRef)), nil
}

// endpointsForType reads the type index under every entry that matches
// eventType: one short scan per segment of the type, and one for
// [AllTypes]. An endpoint that more than one of its entries match is
// listed once.
func (r *Registry) endpointsForType(tenantID, eventType string) ([]EndpointRef, error) {
	var refs []EndpointRef
	for _, p := range eventtype.Patterns(eventType) {
		found, err := r.refs(tenantID, p)
		if err != nil {
			return nil, err
		}
		refs = append(refs, found...)
	}
	slices.SortStableFunc(refs, func(a, b EndpointRef) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(refs, func(a, b EndpointRef) bool { return a.ID == b.ID }), nil
}

func (r *Registry) refs(tenantID, eventType string) ([]EndpointRef, error) {
	prefix := typePrefix(tenantID, eventType)
	var refs []EndpointRef
	err := r.store.ScanPrefix(prefix, func(key, value []byte) (bool, error) {
		id, _, err := projections.ReadString(key[len(prefix):])
		if err != nil {
			return false, err
		}
		ref := EndpointRef{}
		if err := json.Unmarshal(value, &ref); err != nil {
			return false, err
		}
		ref.ID = id
		refs = append(refs, ref)
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("endpoints for %s/%s: %w", tenantID, eventType, err)
	}
	return refs, nil
}

// TenantEndpointIDs returns the ids of every endpoint the tenant ever
// created, deleted ones included, in id order.
func (r *Registry) TenantEndpointIDs(tenantID string) ([]string, error) {
	ids, err := r.store.IDs(allPrefix(tenantID))
	if err != nil {
		return nil, fmt.Errorf("endpoints of %s: %w", tenantID, err)
	}
	return ids, nil
}

// ListEndpoints returns up to limit of the tenant's endpoints that are not
// deleted, in id order, after cursor ("" for the first page). next is the
// cursor of the following page, "" after the last one.
func (r *Registry) ListEndpoints(tenantID, cursor string, limit int) (eps []Endpoint, next string, err error) {
	eps, next, err = page(r.store, listPrefix(tenantID), cursor, limit, func(id string, _ []byte) (Endpoint, bool, error) {
		return r.Endpoint(id)
	})
	if err != nil {
		return nil, "", fmt.Errorf("list endpoints of %s: %w", tenantID, err)
	}
	return eps, next, nil
}

// page reads up to limit items (limit <= 0: 100) of the index whose keys are
// prefix and an id (encoded with AppendString), in id order, after the id
// that cursor names ("" for the first page). read turns an id and its value
// into an item, or reports that there is none. next is the cursor of the
// following page, "" after the last one. A malformed cursor fails with
// [ErrBadCursor].
func page[T any](s *projections.Store, prefix []byte, cursor string, limit int, read func(id string, value []byte) (T, bool, error)) (items []T, next string, err error) {
	if limit <= 0 {
		limit = 100
	}
	lower := prefix
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return nil, "", ErrBadCursor
		}
		// Just past the cursor's id.
		lower = append(projections.AppendString(slices.Clone(prefix), string(after)), 0)
	}
	var last string // the id of the last item read
	err = s.Scan(lower, projections.PrefixEnd(prefix), func(key, value []byte) (bool, error) {
		if len(items) == limit {
			next = base64.RawURLEncoding.EncodeToString([]byte(last))
			return false, nil
		}
		id, _, err := projections.ReadString(key[len(prefix):])
		if err != nil {
			return false, err
		}
		item, ok, err := read(id, value)
		if err != nil || !ok {
			return err == nil, err
		}
		items, last = append(items, item), id
		return true, nil
	})
	if err != nil {
		return nil, "", err
	}
	return items, next, nil
}

func (r *Registry) load(key []byte, v any) (bool, error) {
	b, ok, err := r.store.Get(key)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode: %w", err)
	}
	return true, nil
}

// Apply implements [projections.Projection].
func (r *Registry) Apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	b.OnCommit(func() { r.gen.Add(1) })
	switch m := msg.(type) {
	case *hooklinev1.TenantCreated:
		return put(b, tenantKey(m.GetTenantId()), Tenant{
			ID: m.GetTenantId(), Name: m.GetName(), Quota: quota(m.GetQuota()), CreatedAt: asTime(m.GetAt()),
		})
	case *hooklinev1.TenantQuotaChanged:
		var t Tenant
		if ok, err := getJSON(b, tenantKey(m.GetTenantId()), &t); err != nil || !ok {
			return err
		}
		t.Quota = quota(m.GetQuota())
		return put(b, tenantKey(t.ID), t)
	case *hooklinev1.TenantSettingsChanged:
		var t Tenant
		if ok, err := getJSON(b, tenantKey(m.GetTenantId()), &t); err != nil || !ok {
			return err
		}
		t.SchemaEnforcement = m.GetSchemaEnforcement()
		t.Retention = time.Duration(m.GetRetentionSeconds()) * time.Second
		return put(b, tenantKey(t.ID), t)
	case *hooklinev1.TenantErased:
		var t Tenant
		if ok, err := getJSON(b, tenantKey(m.GetTenantId()), &t); err != nil || !ok {
			return err
		}
		if id := m.GetDataKeyId(); id != "" && !slices.Contains(t.ErasedKeys, id) {
			t.ErasedKeys = append(t.ErasedKeys, id)
		}
		t.ErasedAt = asTime(m.GetAt())
		return put(b, tenantKey(t.ID), t)
	case *hooklinev1.EventTypeDefined:
		return put(b, eventTypeKey(m.GetTenantId(), m.GetEventType()), eventTypeOf(m))
	case *hooklinev1.ApiKeyIssued:
		k := apiKey{TenantID: m.GetTenantId(), KeyID: m.GetKeyId(), Hash: m.GetKeySha256(), Name: m.GetName(), IssuedAt: asTime(m.GetAt())}
		if err := put(b, keyIDKey(k.TenantID, k.KeyID), k); err != nil {
			return err
		}
		return put(b, keyHashKey(k.Hash), k)
	case *hooklinev1.ApiKeyRevoked:
		return revokeKey(b, m)
	case *hooklinev1.EndpointCreated:
		return r.createEndpoint(b, m)
	case *hooklinev1.RecoveryStarted:
		return b.Set(recoveringKey(m.GetEndpointId()), []byte(m.GetRecoveryId()))
	case *hooklinev1.RecoveryFinished:
		return b.Delete(recoveringKey(m.GetEndpointId()))
	}
	id, change, err := endpointChange(msg)
	if err != nil || change == nil {
		return err
	}
	return r.updateEndpoint(b, id, change)
}

// revokeKey marks an API key revoked and drops it from the live keys.
func revokeKey(b *projections.Batch, m *hooklinev1.ApiKeyRevoked) error {
	var k apiKey
	if ok, err := getJSON(b, keyIDKey(m.GetTenantId(), m.GetKeyId()), &k); err != nil || !ok {
		return err
	}
	k.Revoked = true
	if err := put(b, keyIDKey(k.TenantID, k.KeyID), k); err != nil {
		return err
	}
	return b.Delete(keyHashKey(k.Hash))
}

// createEndpoint records a new endpoint; a repeated creation changes
// nothing.
func (r *Registry) createEndpoint(b *projections.Batch, m *hooklinev1.EndpointCreated) error {
	cfg, err := proto.Marshal(m.GetConfig())
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	rec := endpointRecord{
		ID: m.GetEndpointId(), TenantID: m.GetTenantId(), ConfigVersion: m.GetConfigVersion(),
		Config: cfg, EventTypes: m.GetConfig().GetEventTypes(), Filter: m.GetConfig().GetFilter(),
		Ordering: m.GetConfig().GetOrdering(), CreatedAt: asTime(m.GetAt()), UpdatedAt: asTime(m.GetAt()),
	}
	if s := m.GetSecret(); s != nil {
		rec.SecretVersions = []int32{s.GetVersion()}
	}
	if err := b.Set(allKey(rec.TenantID, rec.ID), nil); err != nil {
		return err
	}
	return r.updateEndpoint(b, rec.ID, func(e *endpointRecord, exists bool) bool {
		if exists {
			return false
		}
		*e = rec
		return true
	})
}

// endpointChange returns the endpoint that msg changes and the change, for
// [Registry.updateEndpoint]; a nil change when msg changes no endpoint.
func endpointChange(msg proto.Message) (id string, change func(e *endpointRecord, exists bool) bool, err error) {
	switch m := msg.(type) {
	case *hooklinev1.EndpointUpdated:
		cfg, err := proto.Marshal(m.GetConfig())
		if err != nil {
			return "", nil, fmt.Errorf("encode config: %w", err)
		}
		return m.GetEndpointId(), func(e *endpointRecord, exists bool) bool {
			e.ConfigVersion, e.Config, e.EventTypes = m.GetConfigVersion(), cfg, m.GetConfig().GetEventTypes()
			e.Filter, e.Ordering = m.GetConfig().GetFilter(), m.GetConfig().GetOrdering()
			if s := m.GetNewSecret(); s != nil && !slices.Contains(e.SecretVersions, s.GetVersion()) {
				e.SecretVersions = append(e.SecretVersions, s.GetVersion())
			}
			e.UpdatedAt = asTime(m.GetAt())
			return exists
		}, nil
	case *hooklinev1.SecretRotated:
		return m.GetEndpointId(), func(e *endpointRecord, exists bool) bool {
			if v := m.GetSecret().GetVersion(); !slices.Contains(e.SecretVersions, v) {
				e.SecretVersions = append(e.SecretVersions, v)
			}
			e.UpdatedAt = asTime(m.GetAt())
			return exists
		}, nil
	case *hooklinev1.SecretRetired:
		return m.GetEndpointId(), func(e *endpointRecord, exists bool) bool {
			e.SecretVersions = slices.DeleteFunc(e.SecretVersions, func(v int32) bool { return v == m.GetVersion() })
			e.UpdatedAt = asTime(m.GetAt())
			return exists
		}, nil
	case *hooklinev1.EndpointPaused:
		return m.GetEndpointId(), func(e *endpointRecord, exists bool) bool {
			e.Paused, e.PauseReason, e.UpdatedAt = true, m.GetReason(), asTime(m.GetAt())
			return exists
		}, nil
	case *hooklinev1.EndpointResumed:
		return m.GetEndpointId(), func(e *endpointRecord, exists bool) bool {
			e.Paused, e.PauseReason, e.Disabled, e.DisabledReason = false, 0, false, ""
			e.UpdatedAt = asTime(m.GetAt())
			return exists
		}, nil
	case *hooklinev1.EndpointDisabled:
		return m.GetEndpointId(), func(e *endpointRecord, exists bool) bool {
			e.Disabled, e.DisabledReason, e.UpdatedAt = true, m.GetReason(), asTime(m.GetAt())
			return exists
		}, nil
	case *hooklinev1.EndpointDeleted:
		return m.GetEndpointId(), func(e *endpointRecord, exists bool) bool {
			e.Deleted, e.UpdatedAt = true, asTime(m.GetAt())
			return exists
		}, nil
	}
	return "", nil, nil
}

// Recovering returns the ids of the endpoints whose bulk recovery has
// started and not finished, in id order: the node wakes those it hosts,
// so that a recovery resumes after a restart or a failover even when
// nothing else activates its grain.
func (r *Registry) Recovering() ([]string, error) {
	ids, err := r.store.IDs([]byte{'r'})
	if err != nil {
		return nil, fmt.Errorf("recovering endpoints: %w", err)
	}
	return ids, nil
}

// updateEndpoint loads an endpoint's record, lets change edit it, and writes
// it back with its indexes when change reports a change. An event for an
// endpoint that was never created changes nothing.
func (r *Registry) updateEndpoint(b *projections.Batch, id string, change func(e *endpointRecord, exists bool) bool) error {
	var old endpointRecord
	exists, err := getJSON(b, endpointKey(id), &old)
	if err != nil {
		return err
	}
	e := old
	e.SecretVersions = slices.Clone(old.SecretVersions)
	if !change(&e, exists) {
		return nil
	}
	if exists {
		if err := deleteIndexes(b, &old); err != nil {
			return err
		}
	}
	if err := putIndexes(b, &e); err != nil {
		return err
	}
	return put(b, endpointKey(id), e)
}

// deleteIndexes removes the list and type index entries of e.
func deleteIndexes(b *projections.Batch, e *endpointRecord) error {
	if err := b.Delete(listKey(e.TenantID, e.ID)); err != nil {
		return err
	}
	for _, t := range indexTypes(e.EventTypes) {
		if err := b.Delete(typeKey(e.TenantID, t, e.ID)); err != nil {
			return err
		}
	}
	return nil
}

// putIndexes writes the index entries of e: listed unless deleted, by type
// unless deleted or disabled.
func putIndexes(b *projections.Batch, e *endpointRecord) error {
	if e.Deleted {
		return nil
	}
	if err := b.Set(listKey(e.TenantID, e.ID), nil); err != nil {
		return err
	}
	if e.Disabled {
		return nil
	}
	for _, t := range indexTypes(e.EventTypes) {
		if err := put(b, typeKey(e.TenantID, t, e.ID), EndpointRef{ConfigVersion: e.ConfigVersion, Paused: e.Paused, Filter: e.Filter, Ordering: e.Ordering}); err != nil {
			return err
		}
	}
	return nil
}

// indexTypes returns the entries an endpoint is indexed under, patterns
// as they are (order.*): [AllTypes] alone when it subscribes to
// everything.
func indexTypes(types []string) []string { return eventtype.Entries(types) }

// endpointRecord is the stored form of an Endpoint: the config as protobuf.
type endpointRecord struct {
	ID             string
	TenantID       string
	ConfigVersion  int64
	Config         []byte
	EventTypes     []string
	Filter         string                 `json:",omitempty"`
	Ordering       hooklinev1.KeyOrdering `json:",omitempty"`
	SecretVersions []int32
	Paused         bool
	PauseReason    hooklinev1.EndpointPaused_Reason
	Disabled       bool
	DisabledReason string
	Deleted        bool
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (e endpointRecord) endpoint() (Endpoint, error) {
	cfg := &hooklinev1.EndpointConfig{}
	if err := proto.Unmarshal(e.Config, cfg); err != nil {
		return Endpoint{}, fmt.Errorf("decode config: %w", err)
	}
	return Endpoint{
		ID: e.ID, TenantID: e.TenantID, ConfigVersion: e.ConfigVersion, Config: cfg,
		SecretVersions: e.SecretVersions, Paused: e.Paused, PauseReason: e.PauseReason,
		Disabled: e.Disabled, DisabledReason: e.DisabledReason, Deleted: e.Deleted,
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}, nil
}

type apiKey struct {
	TenantID string
	KeyID    string
	Hash     []byte
	Name     string
	Revoked  bool
	IssuedAt time.Time
}

// Keys, under the registry's prefix (S = projections.AppendString):
//
//	t S(tenant)                       Tenant (JSON)
//	k hash                            live API key by SHA-256: apiKey (JSON)
//	K S(tenant) S(key id)             API key by id, revoked ones too
//	e S(endpoint)                     endpointRecord (JSON)
//	l S(tenant) S(endpoint)           the tenant's endpoints, deleted excluded
//	a S(tenant) S(endpoint)           every endpoint the tenant created, deleted included
//	x S(tenant) S(entry) S(endpoint)  EndpointRef (JSON), deleted and disabled excluded; entry is
//	                                  an event type, a prefix pattern (order.*) or *
func tenantKey(id string) []byte { return projections.AppendString([]byte{'t'}, id) }

// eventTypeKey is where the newest version of a catalog's type is kept.
func eventTypeKey(tenantID, typ string) []byte {
	return projections.AppendString(projections.AppendString([]byte{'c'}, tenantID), typ)
}

func keyHashKey(hash []byte) []byte { return append([]byte{'k'}, hash...) }

func keyIDKey(tenantID, keyID string) []byte {
	return projections.AppendString(projections.AppendString([]byte{'K'}, tenantID), keyID)
}

func endpointKey(id string) []byte { return projections.AppendString([]byte{'e'}, id) }

func recoveringKey(id string) []byte { return projections.AppendString([]byte{'r'}, id) }

func listPrefix(tenantID string) []byte { return projections.AppendString([]byte{'l'}, tenantID) }

func listKey(tenantID, id string) []byte { return projections.AppendString(listPrefix(tenantID), id) }

func allPrefix(tenantID string) []byte { return projections.AppendString([]byte{'a'}, tenantID) }

func allKey(tenantID, id string) []byte { return projections.AppendString(allPrefix(tenantID), id) }

func typePrefix(tenantID, eventType string) []byte {
	return projections.AppendString(projections.AppendString([]byte{'x'}, tenantID), eventType)
}

func typeKey(tenantID, eventType, id string) []byte {
	return projections.AppendString(typePrefix(tenantID, eventType), id)
}

func put(b *projections.Batch, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return b.Set(key, data)
}

func getJSON(b *projections.Batch, key []byte, v any) (bool, error) {
	data, ok, err := b.Get(key)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode: %w", err)
	}
	return true, nil
}

func quota(q *hooklinev1.Quota) Quota {
	return Quota{AttemptsPerSecond: q.GetAttemptsPerSecond(), MaxInFlight: q.GetMaxInFlight(), Weight: q.GetWeight()}
}

// asTime converts a timestamp, nil to the zero time.
func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
