package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/hookline/hookline/projections"
)

// ListTenants returns up to limit tenants in id order, after cursor (""
// for the first page); limit <= 0 means 100. next is the cursor of the
// following page, "" after the last one. A malformed cursor fails with
// [ErrBadCursor].
func (r *Registry) ListTenants(cursor string, limit int) (ts []Tenant, next string, err error) {
	if limit <= 0 {
		limit = 100
	}
	prefix := []byte{'t'}
	lower := prefix
	if cursor != "" {
		after, derr := base64.RawURLEncoding.DecodeString(cursor)
		if derr != nil {
			return nil, "", fmt.Errorf("list tenants: %w", ErrBadCursor)
		}
		// Just past the cursor's tenant.
		lower = append(tenantKey(string(after)), 0)
	}
	it, err := r.store.NewIter(lower, projections.PrefixEnd(prefix))
	if err != nil {
		return nil, "", fmt.Errorf("list tenants: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if len(ts) == limit {
			next = base64.RawURLEncoding.EncodeToString([]byte(ts[limit-1].ID))
			break
		}
		v, err := it.Value()
		if err != nil {
			return nil, "", fmt.Errorf("list tenants: %w", err)
		}
		var t Tenant
		if err := json.Unmarshal(v, &t); err != nil {
			return nil, "", fmt.Errorf("list tenants: decode: %w", err)
		}
		ts = append(ts, t)
	}
	return ts, next, nil
}

// KeyLive reports whether the tenant's API key keyID was issued and is not
// revoked.
func (r *Registry) KeyLive(tenantID, keyID string) (bool, error) {
	var k apiKey
	ok, err := r.load(keyIDKey(tenantID, keyID), &k)
	if err != nil {
		return false, fmt.Errorf("api key %s/%s: %w", tenantID, keyID, err)
	}
	return ok && !k.Revoked, nil
}
