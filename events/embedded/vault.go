package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
)

var _ events.Vault = (*Log)(nil)

// The vault keeps one file per tenant, <tenant>.key in Config.VaultDir,
// written whole (a temporary file synced, renamed, the directory synced)
// and removed on destruction. Nothing of it is in the Pebble store.

// vaultFile is a key file's content.
type vaultFile struct {
	ID     string `json:"id"`
	Sealed []byte `json:"sealed"`
}

// DataKey implements [events.Vault].
func (l *Log) DataKey(_ context.Context, tenantID string) (events.DataKey, error) {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	return l.readKey(tenantID)
}

// PutDataKey implements [events.Vault].
func (l *Log) PutDataKey(_ context.Context, k events.DataKey) (events.DataKey, error) {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	cur, err := l.readKey(k.TenantID)
	if !errors.Is(err, events.ErrNoDataKey) {
		return cur, err
	}
	return k, l.writeKey(k)
}

// ReplaceDataKey implements [events.Vault].
func (l *Log) ReplaceDataKey(_ context.Context, old, k events.DataKey) error {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	cur, err := l.readKey(old.TenantID)
	if errors.Is(err, events.ErrNoDataKey) || err == nil && (cur.ID != old.ID || string(cur.Sealed) != string(old.Sealed)) {
		return events.ErrDataKeyChanged
	}
	if err != nil {
		return err
	}
	return l.writeKey(k)
}

// DestroyDataKey implements [events.Vault].
func (l *Log) DestroyDataKey(_ context.Context, tenantID, id string) error {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	cur, err := l.readKey(tenantID)
	switch {
	case errors.Is(err, events.ErrNoDataKey):
		return nil
	case err != nil:
		return err
	case cur.ID != id:
		return nil
	}
	fs, dir := l.cfg.FS, l.cfg.VaultDir
	if err := fs.Remove(fs.PathJoin(dir, keyFileName(tenantID))); err != nil {
		return fmt.Errorf("vault: destroy the data key of %s: %w", tenantID, err)
	}
	return syncDir(fs, dir)
}

// DataKeys implements [events.Vault].
func (l *Log) DataKeys(context.Context) ([]events.DataKey, error) {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	names, err := l.cfg.FS.List(l.cfg.VaultDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vault: list %s: %w", l.cfg.VaultDir, err)
	}
	var out []events.DataKey
	for _, n := range names {
		tenant, ok := strings.CutSuffix(n, ".key")
		if !ok {
			continue
		}
		k, err := l.readKey(tenant)
		if errors.Is(err, events.ErrNoDataKey) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

func keyFileName(tenantID string) string { return tenantID + ".key" }

// readKey reads a tenant's key file; l.vaultMu is held.
func (l *Log) readKey(tenantID string) (events.DataKey, error) {
	if !validVaultName(tenantID) {
		return events.DataKey{}, fmt.Errorf("vault: %q is not a tenant id", tenantID)
	}
	f, err := l.cfg.FS.Open(l.cfg.FS.PathJoin(l.cfg.VaultDir, keyFileName(tenantID)))
	if errors.Is(err, os.ErrNotExist) {
		return events.DataKey{}, events.ErrNoDataKey
	}
	if err != nil {
		return events.DataKey{}, fmt.Errorf("vault: read the data key of %s: %w", tenantID, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return events.DataKey{}, fmt.Errorf("vault: read the data key of %s: %w", tenantID, err)
	}
	var v vaultFile
	if err := json.Unmarshal(b, &v); err != nil || v.ID == "" {
		return events.DataKey{}, fmt.Errorf("vault: the key file of %s is damaged", tenantID)
	}
	return events.DataKey{TenantID: tenantID, ID: v.ID, Sealed: v.Sealed}, nil
}

// writeKey writes a tenant's key file durably; l.vaultMu is held.
func (l *Log) writeKey(k events.DataKey) error {
	if !validVaultName(k.TenantID) || k.ID == "" {
		return fmt.Errorf("vault: %q is not a tenant id, or the key has no id", k.TenantID)
	}
	fs, dir := l.cfg.FS, l.cfg.VaultDir
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	b, err := json.Marshal(vaultFile{ID: k.ID, Sealed: k.Sealed})
	if err != nil {
		return err
	}
	name := fs.PathJoin(dir, keyFileName(k.TenantID))
	tmp := name + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("vault: write the data key of %s: %w", k.TenantID, err)
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	return syncDir(fs, dir)
}

// syncDir makes a directory's entries durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	return errors.Join(d.Sync(), d.Close())
}

// validVaultName reports whether a tenant id makes a safe file name.
func validVaultName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
