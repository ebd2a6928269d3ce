package embedded

import (
	"cmp"
	"context"
	"encoding/hex"
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

// The vault keeps one file per tenant in Config.VaultDir, named by the hex
// of the tenant id (<hex>.dkey: tenant ids differ in case, file systems
// may not), and the current KEK's id in the file kek. Each is written
// whole (a temporary file synced, renamed, the directory synced); a key
// file is removed on destruction. Nothing of it is in the Pebble store.
// Key files of earlier versions, named <tenant>.key, are renamed when the
// log opens (migrateVault).

// Names in the vault directory.
const (
	keyExt       = ".dkey"
	legacyKeyExt = ".key"
	kekFileName  = "kek"
)

// vaultFile is a key file's content.
type vaultFile struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	KEK    string `json:"kek,omitempty"`
	Sealed []byte `json:"sealed"`
}

// kekFile is the kek file's content.
type kekFile struct {
	ID string `json:"id"`
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
	kek, err := l.readKEK()
	if err != nil {
		return events.DataKey{}, err
	}
	if k.KEK != kek {
		return events.DataKey{}, events.ErrKEKChanged
	}
	return k, l.writeKey(k)
}

// ReplaceDataKey implements [events.Vault].
func (l *Log) ReplaceDataKey(_ context.Context, old, k events.DataKey) error {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	cur, err := l.readKey(old.TenantID)
	if errors.Is(err, events.ErrNoDataKey) || err == nil && (cur.ID != old.ID || cur.KEK != old.KEK || string(cur.Sealed) != string(old.Sealed)) {
		return events.ErrDataKeyChanged
	}
	if err != nil {
		return err
	}
	if kek, err := l.readKEK(); err != nil || k.KEK != kek {
		return cmp.Or(err, events.ErrKEKChanged)
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
		tenant, ok := tenantOfFile(n)
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

// KEK implements [events.Vault].
func (l *Log) KEK(context.Context) (string, error) {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	return l.readKEK()
}

// SetKEK implements [events.Vault]. PutDataKey holds the same lock, so
// none is half done under old when it returns.
func (l *Log) SetKEK(_ context.Context, old, id string) error {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	cur, err := l.readKEK()
	if err != nil {
		return err
	}
	if cur != old {
		return events.ErrKEKChanged
	}
	b, err := json.Marshal(kekFile{ID: id})
	if err != nil {
		return err
	}
	return l.writeFile(kekFileName, b)
}

// keyFileName names a tenant's key file: the hex of its id, the same on a
// file system that ignores case.
func keyFileName(tenantID string) string { return hex.EncodeToString([]byte(tenantID)) + keyExt }

// tenantOfFile is the tenant whose key file is named name.
func tenantOfFile(name string) (string, bool) {
	h, ok := strings.CutSuffix(name, keyExt)
	if !ok {
		return "", false
	}
	b, err := hex.DecodeString(h)
	if err != nil || !validVaultName(string(b)) {
		return "", false
	}
	return string(b), true
}

// readKey reads a tenant's key file; l.vaultMu is held.
func (l *Log) readKey(tenantID string) (events.DataKey, error) {
	if !validVaultName(tenantID) {
		return events.DataKey{}, fmt.Errorf("vault: %q is not a tenant id", tenantID)
	}
	b, err := l.readFile(keyFileName(tenantID))
	if errors.Is(err, os.ErrNotExist) {
		return events.DataKey{}, events.ErrNoDataKey
	}
	if err != nil {
		return events.DataKey{}, fmt.Errorf("vault: read the data key of %s: %w", tenantID, err)
	}
	var v vaultFile
	if err := json.Unmarshal(b, &v); err != nil || v.ID == "" || v.Tenant != tenantID {
		return events.DataKey{}, fmt.Errorf("vault: the key file of %s is damaged", tenantID)
	}
	return events.DataKey{TenantID: tenantID, ID: v.ID, KEK: v.KEK, Sealed: v.Sealed}, nil
}

// readKEK reads the current KEK's id, "" when there is none; l.vaultMu is
// held.
func (l *Log) readKEK() (string, error) {
	b, err := l.readFile(kekFileName)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("vault: read the current key-encryption key: %w", err)
	}
	var f kekFile
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("vault: the file %s is damaged", kekFileName)
	}
	return f.ID, nil
}

// writeKey writes a tenant's key file durably; l.vaultMu is held.
func (l *Log) writeKey(k events.DataKey) error {
	if !validVaultName(k.TenantID) || k.ID == "" {
		return fmt.Errorf("vault: %q is not a tenant id, or the key has no id", k.TenantID)
	}
	b, err := json.Marshal(vaultFile{Tenant: k.TenantID, ID: k.ID, KEK: k.KEK, Sealed: k.Sealed})
	if err != nil {
		return err
	}
	if err := l.writeFile(keyFileName(k.TenantID), b); err != nil {
		return fmt.Errorf("vault: write the data key of %s: %w", k.TenantID, err)
	}
	return nil
}

// readFile reads a file of the vault directory.
func (l *Log) readFile(name string) ([]byte, error) {
	f, err := l.cfg.FS.Open(l.cfg.FS.PathJoin(l.cfg.VaultDir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFile writes a file of the vault directory whole and durably: a
// temporary file synced, renamed, the directory synced.
func (l *Log) writeFile(name string, b []byte) error {
	fs, dir := l.cfg.FS, l.cfg.VaultDir
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	path := fs.PathJoin(dir, name)
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("vault: write %s: %w", name, err)
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	return syncDir(fs, dir)
}

// migrateVault renames the key files of earlier versions, <tenant>.key,
// to <hex of tenant>.dkey, each written in full before the old one is
// removed, so a crash midway leaves both and the next open finishes. Two
// tenants whose ids differ only in case shared one legacy file on a file
// system that ignores case: that file is the one listed, and its key is
// bound to the tenant that sealed it, so it opens for that tenant only.
func (l *Log) migrateVault() error {
	l.vaultMu.Lock()
	defer l.vaultMu.Unlock()
	fs, dir := l.cfg.FS, l.cfg.VaultDir
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vault: list %s: %w", dir, err)
	}
	for _, n := range names {
		tenant, ok := strings.CutSuffix(n, legacyKeyExt)
		if !ok || !validVaultName(tenant) {
			continue
		}
		if _, err := l.readKey(tenant); errors.Is(err, events.ErrNoDataKey) {
			b, err := l.readFile(n)
			if err != nil {
				return fmt.Errorf("vault: read %s: %w", n, err)
			}
			var v vaultFile
			if err := json.Unmarshal(b, &v); err != nil || v.ID == "" {
				return fmt.Errorf("vault: the key file %s is damaged", n)
			}
			if err := l.writeKey(events.DataKey{TenantID: tenant, ID: v.ID, KEK: v.KEK, Sealed: v.Sealed}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if err := fs.Remove(fs.PathJoin(dir, n)); err != nil {
			return fmt.Errorf("vault: remove %s: %w", n, err)
		}
		if err := syncDir(fs, dir); err != nil {
			return err
		}
	}
	return nil
}

// syncDir makes a directory's entries durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	return errors.Join(d.Sync(), d.Close())
}

// validVaultName reports whether s is a tenant id the vault keeps a key
// for.
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
