package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/events"
)

var _ events.Vault = (*Log)(nil)

// The vault is the table data_keys, one row per tenant, beside the events
// and never in them: a dump of the events holds no key. Destroying a key
// deletes its row; PostgreSQL's VACUUM then frees the space it held.

// DataKey implements [events.Vault].
func (l *Log) DataKey(ctx context.Context, tenantID string) (events.DataKey, error) {
	k := events.DataKey{TenantID: tenantID}
	err := l.pool.QueryRow(ctx, fmt.Sprintf(`SELECT id, sealed FROM %s.data_keys WHERE tenant_id = $1`, l.schema), tenantID).Scan(&k.ID, &k.Sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return events.DataKey{}, events.ErrNoDataKey
	}
	if err != nil {
		return events.DataKey{}, fmt.Errorf("vault: read the data key of %s: %w", tenantID, err)
	}
	return k, nil
}

// PutDataKey implements [events.Vault].
func (l *Log) PutDataKey(ctx context.Context, k events.DataKey) (events.DataKey, error) {
	_, err := l.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.data_keys (tenant_id, id, sealed) VALUES ($1, $2, $3) ON CONFLICT (tenant_id) DO NOTHING`, l.schema), k.TenantID, k.ID, k.Sealed)
	if err != nil {
		return events.DataKey{}, fmt.Errorf("vault: store the data key of %s: %w", k.TenantID, err)
	}
	return l.DataKey(ctx, k.TenantID)
}

// ReplaceDataKey implements [events.Vault].
func (l *Log) ReplaceDataKey(ctx context.Context, old, k events.DataKey) error {
	tag, err := l.pool.Exec(ctx, fmt.Sprintf(`UPDATE %s.data_keys SET id = $3, sealed = $4 WHERE tenant_id = $1 AND id = $2 AND sealed = $5`, l.schema),
		old.TenantID, old.ID, k.ID, k.Sealed, old.Sealed)
	if err != nil {
		return fmt.Errorf("vault: replace the data key of %s: %w", old.TenantID, err)
	}
	if tag.RowsAffected() == 0 {
		return events.ErrDataKeyChanged
	}
	return nil
}

// DestroyDataKey implements [events.Vault].
func (l *Log) DestroyDataKey(ctx context.Context, tenantID, id string) error {
	_, err := l.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s.data_keys WHERE tenant_id = $1 AND id = $2`, l.schema), tenantID, id)
	if err != nil {
		return fmt.Errorf("vault: destroy the data key of %s: %w", tenantID, err)
	}
	return nil
}

// DataKeys implements [events.Vault].
func (l *Log) DataKeys(ctx context.Context) ([]events.DataKey, error) {
	rows, err := l.pool.Query(ctx, fmt.Sprintf(`SELECT tenant_id, id, sealed FROM %s.data_keys ORDER BY tenant_id`, l.schema))
	if err != nil {
		return nil, fmt.Errorf("vault: list the data keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (events.DataKey, error) {
		var k events.DataKey
		return k, r.Scan(&k.TenantID, &k.ID, &k.Sealed)
	})
	if err != nil {
		return nil, fmt.Errorf("vault: list the data keys: %w", err)
	}
	return out, nil
}
