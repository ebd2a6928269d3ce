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
// and never in them: a dump of the events holds no key. Each row names the
// key-encryption key (KEK) its key is wrapped under; vault_kek holds the id
// of the current one, which no other table of the log does: the KEK itself
// lives apart (package seal), so a copy of these tables, in a backup, the
// WAL or a replica, opens nothing once the KEK it names is destroyed.
// Destroying a key deletes its row; PostgreSQL's VACUUM then frees the
// space it held.

// DataKey implements [events.Vault].
func (l *Log) DataKey(ctx context.Context, tenantID string) (events.DataKey, error) {
	k := events.DataKey{TenantID: tenantID}
	err := l.pool.QueryRow(ctx, fmt.Sprintf(`SELECT id, kek, sealed FROM %s.data_keys WHERE tenant_id = $1`, l.schema), tenantID).Scan(&k.ID, &k.KEK, &k.Sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return events.DataKey{}, events.ErrNoDataKey
	}
	if err != nil {
		return events.DataKey{}, fmt.Errorf("vault: read the data key of %s: %w", tenantID, err)
	}
	return k, nil
}

// PutDataKey implements [events.Vault]. It holds vault_kek's row in share
// mode while it inserts, so SetKEK waits for it, and it sees the KEK that
// SetKEK set if it waited.
func (l *Log) PutDataKey(ctx context.Context, k events.DataKey) (events.DataKey, error) {
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if err := l.checkKEK(ctx, tx, k.KEK); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.data_keys (tenant_id, id, kek, sealed) VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id) DO NOTHING`, l.schema), k.TenantID, k.ID, k.KEK, k.Sealed)
		return err
	})
	if errors.Is(err, events.ErrKEKChanged) {
		return events.DataKey{}, err
	}
	if err != nil {
		return events.DataKey{}, fmt.Errorf("vault: store the data key of %s: %w", k.TenantID, err)
	}
	return l.DataKey(ctx, k.TenantID)
}

// ReplaceDataKey implements [events.Vault]. It holds vault_kek's row in
// share mode, as PutDataKey does.
func (l *Log) ReplaceDataKey(ctx context.Context, old, k events.DataKey) error {
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if err := l.checkKEK(ctx, tx, k.KEK); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s.data_keys SET id = $3, kek = $4, sealed = $5 WHERE tenant_id = $1 AND id = $2 AND kek = $6 AND sealed = $7`, l.schema),
			old.TenantID, old.ID, k.ID, k.KEK, k.Sealed, old.KEK, old.Sealed)
		if err == nil && tag.RowsAffected() == 0 {
			err = events.ErrDataKeyChanged
		}
		return err
	})
	if err != nil && !errors.Is(err, events.ErrKEKChanged) && !errors.Is(err, events.ErrDataKeyChanged) {
		return fmt.Errorf("vault: replace the data key of %s: %w", old.TenantID, err)
	}
	return err
}

// checkKEK fails with ErrKEKChanged unless kek is the current KEK, and
// holds vault_kek's row in share mode until tx ends: SetKEK waits for tx.
func (l *Log) checkKEK(ctx context.Context, tx pgx.Tx, kek string) error {
	var cur string
	if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT id FROM %s.vault_kek FOR SHARE`, l.schema)).Scan(&cur); err != nil {
		return err
	}
	if cur != kek {
		return events.ErrKEKChanged
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
	rows, err := l.pool.Query(ctx, fmt.Sprintf(`SELECT tenant_id, id, kek, sealed FROM %s.data_keys ORDER BY tenant_id`, l.schema))
	if err != nil {
		return nil, fmt.Errorf("vault: list the data keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (events.DataKey, error) {
		var k events.DataKey
		return k, r.Scan(&k.TenantID, &k.ID, &k.KEK, &k.Sealed)
	})
	if err != nil {
		return nil, fmt.Errorf("vault: list the data keys: %w", err)
	}
	return out, nil
}

// KEK implements [events.Vault].
func (l *Log) KEK(ctx context.Context) (string, error) {
	var id string
	if err := l.pool.QueryRow(ctx, fmt.Sprintf(`SELECT id FROM %s.vault_kek`, l.schema)).Scan(&id); err != nil {
		return "", fmt.Errorf("vault: read the current key-encryption key: %w", err)
	}
	return id, nil
}

// SetKEK implements [events.Vault]. Its update waits for the PutDataKey
// transactions that hold the row in share mode.
func (l *Log) SetKEK(ctx context.Context, old, id string) error {
	tag, err := l.pool.Exec(ctx, fmt.Sprintf(`UPDATE %s.vault_kek SET id = $2 WHERE id = $1`, l.schema), old, id)
	if err != nil {
		return fmt.Errorf("vault: set the key-encryption key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return events.ErrKEKChanged
	}
	return nil
}
