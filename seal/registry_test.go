package seal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// memLog is a log on an in-memory file system, shared by the "nodes" of a
// test as a shared log would be.
func memLog(t *testing.T) events.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func keyring(t *testing.T, keys ...seal.Key) *seal.Keyring {
	t.Helper()
	kr, err := seal.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// TestCheckLog plays the accident and a rotation on one shared
// log: nodes with different keys, a node missing the new key, a key under
// a registered id that is another key, and a node whose current key was
// retired.
func TestCheckLog(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	a, b := seal.Key{Secret: newKey(t)}, seal.Key{Secret: newKey(t)}
	l := memLog(t)

	steps := []struct {
		name string
		run  func() error
		want error
	}{
		{"the first node registers its key", func() error { return seal.CheckLog(ctx, l, keyring(t, a), now) }, nil},
		{"a second node with the same key starts", func() error { return seal.CheckLog(ctx, l, keyring(t, a), now) }, nil},
		{"a node with its own key is refused", func() error { return seal.CheckLog(ctx, l, keyring(t, b), now) }, seal.ErrMissingKey},
		{"another key under the registered id is refused", func() error {
			return seal.CheckLog(ctx, l, keyring(t, seal.Key{ID: seal.KeyID(a.Secret), Secret: b.Secret}), now)
		}, seal.ErrKeyMismatch},
		{"rotation: the new key first, the old one kept", func() error { return seal.CheckLog(ctx, l, keyring(t, b, a), now) }, nil},
		{"a node with only the old key is refused now", func() error { return seal.CheckLog(ctx, l, keyring(t, a), now) }, seal.ErrMissingKey},
		{"the old key is retired", func() error {
			ids, err := seal.RetireOthers(ctx, l, keyring(t, b, a), &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_ADMIN, Id: "admin"}, now)
			if err == nil && (len(ids) != 1 || ids[0] != seal.KeyID(a.Secret)) {
				t.Fatalf("retired %v, want [%s]", ids, seal.KeyID(a.Secret))
			}
			return err
		}, nil},
		{"a node with the new key alone starts", func() error { return seal.CheckLog(ctx, l, keyring(t, b), now) }, nil},
		{"a node still sealing with the old key is refused", func() error { return seal.CheckLog(ctx, l, keyring(t, a, b), now) }, seal.ErrRetiredKey},
		{"retiring again retires nothing", func() error {
			ids, err := seal.RetireOthers(ctx, l, keyring(t, b), nil, now)
			if len(ids) != 0 {
				t.Fatalf("retired %v again", ids)
			}
			return err
		}, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			err := s.run()
			if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
				t.Fatalf("got %v, want %v", err, s.want)
			}
			if err != nil && (strings.Contains(err.Error(), string(a.Secret)) || strings.Contains(err.Error(), string(b.Secret))) {
				t.Fatalf("error %q shows a key", err)
			}
		})
	}
	recs, err := l.ReadStream(ctx, seal.RegistryStream, events.Forwards, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, r := range recs {
		types = append(types, r.Type)
	}
	if got := strings.Join(types, ","); got != "MasterKeyRegistered,MasterKeyRegistered,MasterKeyRetired" {
		t.Fatalf("registry stream holds %s", got)
	}
}

// TestCheckLogRace: nodes starting at once with the same new key each
// register it or find it registered; the stream holds it once.
func TestCheckLogRace(t *testing.T) {
	ctx := context.Background()
	l := memLog(t)
	k := seal.Key{Secret: newKey(t)}
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- seal.CheckLog(ctx, l, keyring(t, k), time.Now()) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	recs, err := l.ReadStream(ctx, seal.RegistryStream, events.Forwards, 0, 100)
	if err != nil || len(recs) != 1 {
		t.Fatalf("registry stream: %d records, %v; want 1", len(recs), err)
	}
}
