package archive_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
)

// TestFileBucket: the file bucket of every build opens file:// URLs as
// gocloud.dev's fileblob did (create_dir; a missing directory refused with
// the fix), reads an archive fileblob wrote (its ".attrs" side files are
// not objects, and go with their object when a purge deletes it), lists
// no temporary file, and names the build tag for a cloud scheme.
func TestFileBucket(t *testing.T) {
	t.Run("a missing directory", func(t *testing.T) {
		_, err := archive.Open(t.Context(), "file://"+filepath.Join(t.TempDir(), "nope"), nil)
		if err == nil || !strings.Contains(err.Error(), "create_dir=1") {
			t.Fatalf("a missing directory: %v, want the fix ?create_dir=1", err)
		}
	})
	t.Run("an unknown parameter", func(t *testing.T) {
		_, err := archive.Open(t.Context(), "file://"+t.TempDir()+"?creat_dir=1", nil)
		if err == nil || !strings.Contains(err.Error(), `"creat_dir"`) {
			t.Fatalf("a misspelt parameter: %v", err)
		}
	})
	t.Run("a cloud scheme in the default build", func(t *testing.T) {
		_, err := archive.Open(t.Context(), "s3://bucket?region=eu-west-1", nil)
		if err == nil || !strings.Contains(err.Error(), "-tags cloudarchive") {
			t.Fatalf("s3:// without the drivers: %v, want the build tag named", err)
		}
	})
	t.Run("an archive fileblob wrote", func(t *testing.T) {
		dir := t.TempDir()
		a := open(t, dir)
		if err := a.Write(t.Context(), records("event-gone.e1", 2, 1, "g")); err != nil {
			t.Fatal(err)
		}
		// fileblob's side files, and a temporary file of a write cut short.
		objects, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
		for _, o := range objects {
			if err := os.WriteFile(o+".attrs", []byte(`{"user.content_type":"x"}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "index", ".cut.idx.123.tmp"), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
		b := open(t, dir)
		if got, err := b.ReadStream(t.Context(), "event-gone.e1"); err != nil || len(got) != 2 {
			t.Fatalf("read back: %d records, %v", len(got), err)
		}
		if n, err := b.Purge(t.Context(), func(string, []events.Record) bool { return true }); err != nil || n != 1 {
			t.Fatalf("purge: %d, %v", n, err)
		}
		left, _ := filepath.Glob(filepath.Join(dir, "*", "*.attrs"))
		if len(left) != 0 {
			t.Fatalf("side files left after their objects were deleted: %v", left)
		}
	})
}
