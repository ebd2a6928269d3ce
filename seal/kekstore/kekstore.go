package kekstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/seal"
)

// ext names a KEK's file or object.
const ext = ".kek"

// Store is a [seal.KEKStore]. It is safe for concurrent use.
type Store struct {
	dir    string         // a directory of its own, or
	bucket archive.Bucket // an object store
	where  string         // the URL without credentials, for messages
}

var _ seal.KEKStore = (*Store)(nil)

// Open opens the store at rawURL: file:///path for a directory (created
// when missing, mode 0700), or an object store's URL of a scheme the build
// registers with package archive (s3://, gs://, azblob:// in a build with
// -tags cloudarchive).
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("vault KEK store: %q is not a URL; give file:///path or s3://bucket", rawURL)
	}
	where := *u
	where.RawQuery, where.User = "", nil
	if u.Scheme == "file" {
		dir := filepath.FromSlash(u.Path)
		if dir == "" {
			return nil, fmt.Errorf("vault KEK store %s: give the directory as file:///path", where.String())
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("vault KEK store: %w", err)
		}
		return &Store{dir: dir, where: where.String()}, nil
	}
	b, err := archive.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("vault KEK store %s: %w", where.String(), err)
	}
	return &Store{bucket: b, where: where.String()}, nil
}

// String names the store without credentials.
func (s *Store) String() string { return s.where }

// Close releases the store.
func (s *Store) Close() error {
	if s.bucket != nil {
		return s.bucket.Close()
	}
	return nil
}

// Get implements [seal.KEKStore].
func (s *Store) Get(ctx context.Context, id string) ([]byte, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var b []byte
	var err error
	if s.bucket != nil {
		b, err = s.bucket.ReadAll(ctx, id+ext)
		if errors.Is(err, archive.ErrNoObject) {
			err = seal.ErrNoKEK
		}
	} else {
		b, err = os.ReadFile(filepath.Join(s.dir, id+ext))
		if errors.Is(err, os.ErrNotExist) {
			err = seal.ErrNoKEK
		}
	}
	if err != nil && !errors.Is(err, seal.ErrNoKEK) {
		err = fmt.Errorf("vault KEK store %s: read %s: %w", s.where, id, err)
	}
	return b, err
}

// Put implements [seal.KEKStore]. In a directory the file is written
// whole and synced, then renamed, and the directory synced.
func (s *Store) Put(ctx context.Context, id string, sealed []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	if s.bucket != nil {
		if err := s.bucket.WriteAll(ctx, id+ext, sealed); err != nil {
			return fmt.Errorf("vault KEK store %s: write %s: %w", s.where, id, err)
		}
		return nil
	}
	path := filepath.Join(s.dir, id+ext)
	f, err := os.CreateTemp(s.dir, id+".tmp*")
	if err != nil {
		return fmt.Errorf("vault KEK store: %w", err)
	}
	_, werr := f.Write(sealed)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("vault KEK store: write %s: %w", id, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("vault KEK store: %w", err)
	}
	return syncDir(s.dir)
}

// Delete implements [seal.KEKStore].
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if s.bucket != nil {
		if err := s.bucket.Delete(ctx, id+ext); err != nil && !errors.Is(err, archive.ErrNoObject) {
			return fmt.Errorf("vault KEK store %s: delete %s: %w", s.where, id, err)
		}
		return nil
	}
	if err := os.Remove(filepath.Join(s.dir, id+ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vault KEK store: delete %s: %w", id, err)
	}
	return syncDir(s.dir)
}

// List implements [seal.KEKStore].
func (s *Store) List(ctx context.Context) ([]string, error) {
	var ids []string
	if s.bucket != nil {
		keys, err := s.bucket.List(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("vault KEK store %s: list: %w", s.where, err)
		}
		for _, k := range keys {
			if id, ok := strings.CutSuffix(k, ext); ok && checkID(id) == nil {
				ids = append(ids, id)
			}
		}
		return ids, nil
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("vault KEK store: list: %w", err)
	}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ext); ok && checkID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// checkID refuses an id that is not a KEK's (seal makes them of lower
// case letters, digits and underscores).
func checkID(id string) error {
	if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' }) {
		return fmt.Errorf("vault KEK store: %q is not a key-encryption key's id", id)
	}
	return nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("vault KEK store: %w", err)
	}
	return errors.Join(d.Sync(), d.Close())
}
