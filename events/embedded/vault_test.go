package embedded_test

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
)

// caseless is a file system that ignores the case of names under dir, as
// macOS's and Windows' do by default (names are kept in lower case here).
type caseless struct {
	vfs.FS
	dir string
}

func (c caseless) fold(name string) string {
	if rest, ok := strings.CutPrefix(name, c.dir); ok {
		return c.dir + strings.ToLower(rest)
	}
	return name
}

func (c caseless) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return c.FS.Create(c.fold(name), cat)
}
func (c caseless) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return c.FS.Open(c.fold(name), opts...)
}
func (c caseless) Remove(name string) error { return c.FS.Remove(c.fold(name)) }
func (c caseless) Rename(oldname, newname string) error {
	return c.FS.Rename(c.fold(oldname), c.fold(newname))
}
func (c caseless) Stat(name string) (vfs.FileInfo, error) { return c.FS.Stat(c.fold(name)) }

// TestVaultTenantsThatDifferInCase: two tenants whose ids differ only in
// case keep two keys on a file system that ignores case, and destroying
// one leaves the other.
func TestVaultTenantsThatDifferInCase(t *testing.T) {
	fs := caseless{FS: vfs.NewMem(), dir: "/vault"}
	l, err := embedded.Open(embedded.Config{Dir: "/log", VaultDir: "/vault", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	for _, k := range []events.DataKey{{TenantID: "Acme", ID: "dk_upper", Sealed: []byte("u")}, {TenantID: "acme", ID: "dk_lower", Sealed: []byte("l")}} {
		if got, err := l.PutDataKey(ctx, k); err != nil || got.ID != k.ID {
			t.Fatalf("PutDataKey for %s: %+v, %v; want its own key %s", k.TenantID, got, err, k.ID)
		}
	}
	if err := l.DestroyDataKey(ctx, "acme", "dk_lower"); err != nil {
		t.Fatal(err)
	}
	if got, err := l.DataKey(ctx, "Acme"); err != nil || got.ID != "dk_upper" {
		t.Fatalf("Acme's key after acme's was destroyed: %+v, %v", got, err)
	}
	if _, err := l.DataKey(ctx, "acme"); !errors.Is(err, events.ErrNoDataKey) {
		t.Fatalf("acme's key after it was destroyed: %v", err)
	}
}

// TestVaultMigratesKeyFiles: a vault of an earlier version, one file
// <tenant>.key per tenant, is renamed when the log opens; the keys read
// as before and no file of the old name is left.
func TestVaultMigratesKeyFiles(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/vault", 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"acme.key": `{"id":"dk_1","sealed":"c2VhbGVk"}`, "Other_1.key": `{"id":"dk_2","sealed":"b3RoZXI="}`} {
		f, err := fs.Create("/vault/"+name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, body); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := embedded.Open(embedded.Config{Dir: "/log", VaultDir: "/vault", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for tenant, want := range map[string]events.DataKey{"acme": {TenantID: "acme", ID: "dk_1", Sealed: []byte("sealed")}, "Other_1": {TenantID: "Other_1", ID: "dk_2", Sealed: []byte("other")}} {
		got, err := l.DataKey(t.Context(), tenant)
		if err != nil || got.ID != want.ID || string(got.Sealed) != string(want.Sealed) {
			t.Fatalf("%s's key after the migration: %+v, %v; want %+v", tenant, got, err, want)
		}
	}
	names, err := fs.List("/vault")
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".key") }) {
		t.Fatalf("the vault after the migration: %v; want no file of the old name", names)
	}
	if keys, err := l.DataKeys(t.Context()); err != nil || len(keys) != 2 {
		t.Fatalf("DataKeys after the migration: %+v, %v", keys, err)
	}
}
