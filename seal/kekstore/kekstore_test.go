package kekstore_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	_ "gocloud.dev/blob/memblob" // mem:// buckets, reached through cloudblob

	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/events/archive/cloudblob"
	"github.com/hookline/hookline/seal"
	"github.com/hookline/hookline/seal/kekstore"
)

// memOnce registers mem:// buckets with package archive once.
var memOnce sync.Once

// TestStore: a KEK put is got back and listed; one deleted is gone (and
// deleting it again is no error); an id that is not a KEK's is refused.
// In a directory and in an object store.
func TestStore(t *testing.T) {
	memOnce.Do(func() {
		archive.Register("mem", func(ctx context.Context, u *url.URL) (archive.Bucket, error) {
			return cloudblob.Open(ctx, u.String())
		})
	})
	for name, url := range map[string]string{
		"directory": "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "keks")),
		"bucket":    "mem://",
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s, err := kekstore.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Get(ctx, "kek_1_aa"); !errors.Is(err, seal.ErrNoKEK) {
				t.Fatalf("Get of a KEK never put: %v, want ErrNoKEK", err)
			}
			for _, id := range []string{"kek_1_aa", "kek_2_bb"} {
				if err := s.Put(ctx, id, []byte("sealed "+id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Put(ctx, "kek_2_bb", []byte("resealed")); err != nil {
				t.Fatal(err)
			}
			if b, err := s.Get(ctx, "kek_2_bb"); err != nil || string(b) != "resealed" {
				t.Fatalf("Get after a second Put: %q, %v", b, err)
			}
			ids, err := s.List(ctx)
			slices.Sort(ids)
			if err != nil || !slices.Equal(ids, []string{"kek_1_aa", "kek_2_bb"}) {
				t.Fatalf("List: %v, %v", ids, err)
			}
			for range 2 {
				if err := s.Delete(ctx, "kek_1_aa"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Get(ctx, "kek_1_aa"); !errors.Is(err, seal.ErrNoKEK) {
				t.Fatalf("Get of a deleted KEK: %v, want ErrNoKEK", err)
			}
			if ids, err := s.List(ctx); err != nil || !slices.Equal(ids, []string{"kek_2_bb"}) {
				t.Fatalf("List after Delete: %v, %v", ids, err)
			}
			if err := s.Put(ctx, "../escape", nil); err == nil {
				t.Fatal("Put of a path, not an id: no error")
			}
		})
	}
}
