package registry

import (
	"encoding/json"
	"fmt"
)

// ListTenants returns up to limit tenants in id order, after cursor (""
// for the first page); limit <= 0 means 100. next is the cursor of the
// following page, "" after the last one. A malformed cursor fails with
// [ErrBadCursor].
func (r *Registry) ListTenants(cursor string, limit int) (ts []Tenant, next string, err error) {
	ts, next, err = page(r.store, []byte{'t'}, cursor, limit, func(_ string, value []byte) (Tenant, bool, error) {
		var t Tenant
		if err := json.Unmarshal(value, &t); err != nil {
			return Tenant{}, false, fmt.Errorf("decode: %w", err)
		}
		return t, true, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list tenants: %w", err)
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
