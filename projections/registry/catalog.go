package registry

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/schema"
)

// EventType is the newest version of a type of a tenant's catalog; its
// example and schema are JSON text, "" when not given.
type EventType struct {
	Type        string
	Version     int32
	Description string    `json:",omitempty"`
	Example     string    `json:",omitempty"`
	Schema      string    `json:",omitempty"`
	DefinedAt   time.Time `json:",omitzero"`
}

func eventTypeOf(m *hooklinev1.EventTypeDefined) EventType {
	return EventType{
		Type: m.GetEventType(), Version: m.GetVersion(), Description: m.GetDescription(),
		Example: m.GetExample(), Schema: m.GetSchema(), DefinedAt: asTime(m.GetAt()),
	}
}

// EventTypes lists a tenant's catalog by type.
func (r *Registry) EventTypes(tenantID string) ([]EventType, error) {
	prefix := projections.AppendString([]byte{'c'}, tenantID)
	var out []EventType
	err := r.store.Scan(prefix, projections.PrefixEnd(prefix), func(_, value []byte) (bool, error) {
		var t EventType
		if err := json.Unmarshal(value, &t); err != nil {
			return false, fmt.Errorf("decode: %w", err)
		}
		out = append(out, t)
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("event types of %s: %w", tenantID, err)
	}
	return out, nil
}

// EventType returns the newest version of a type of a tenant's catalog.
func (r *Registry) EventType(tenantID, typ string) (EventType, bool, error) {
	v, ok, err := r.remembered("c\x00"+tenantID+"\x00"+typ, func() (any, bool, error) {
		var t EventType
		ok, err := r.load(eventTypeKey(tenantID, typ), &t)
		return t, ok, err
	})
	if err != nil || !ok {
		return EventType{}, ok, err
	}
	return v.(EventType), true, nil
}

// Schema returns the compiled schema of the newest version of a type and
// that version; nil when the type is not in the catalog or has no schema.
// A schema is compiled once per version on each node and kept.
func (r *Registry) Schema(tenantID, typ string) (*schema.Schema, int32, error) {
	t, ok, err := r.EventType(tenantID, typ)
	if err != nil || !ok || t.Schema == "" {
		return nil, 0, err
	}
	return r.schemas.get(tenantID, t)
}

// schemaCache keeps compiled schemas by tenant, type and version.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]compiled
}

type compiled struct {
	version int32
	s       *schema.Schema
	err     error
}

// maxSchemas bounds the compiled schemas kept; past it the cache starts
// again.
const maxSchemas = 10_000

func (c *schemaCache) get(tenantID string, t EventType) (*schema.Schema, int32, error) {
	key := tenantID + "\x00" + t.Type
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.version == t.Version {
		return e.s, e.version, e.err
	}
	// Compiled under the lock: a new version is compiled once, by the
	// first publish that needs it.
	s, err := schema.Compile([]byte(t.Schema))
	if err != nil {
		err = fmt.Errorf("the schema of %s version %d does not compile on this node: %w", t.Type, t.Version, err)
	}
	if c.m == nil || len(c.m) >= maxSchemas {
		c.m = map[string]compiled{}
	}
	c.m[key] = compiled{version: t.Version, s: s, err: err}
	return s, t.Version, err
}
