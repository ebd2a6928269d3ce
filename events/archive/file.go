package archive

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// fileBucket is a Bucket in a directory: an object is a file at its key's
// path. It reads the buckets gocloud.dev's fileblob wrote (the same layout;
// their ".attrs" side files are ignored, and deleted with their object).
type fileBucket struct{ dir string }

// fileParams are the query parameters a file:// URL may carry: create_dir
// (create the directory if missing) and two of fileblob's that mean nothing
// here (no side files are written, temporary files go next to their object).
var fileParams = []string{"create_dir", "metadata", "no_tmp_dir"}

// openFile opens file:///path (file://./rel for a relative path).
func openFile(_ context.Context, u *url.URL) (Bucket, error) {
	for k := range u.Query() {
		if !slices.Contains(fileParams, k) {
			return nil, fmt.Errorf("file bucket: unknown parameter %q (known: %s)", k, strings.Join(fileParams, ", "))
		}
	}
	p := u.Path
	if u.Host == "." {
		p = strings.TrimPrefix(p, "/")
	}
	if p == "" {
		return nil, errors.New("file bucket: no directory; give file:///path")
	}
	dir := filepath.FromSlash(p)
	if u.Query().Get("create_dir") != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("file bucket: %w", err)
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("file bucket: %w (add ?create_dir=1 to create it)", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("file bucket: %s is not a directory", dir)
	}
	return &fileBucket{dir: dir}, nil
}

// path is the file of key, refused when key would leave the directory.
func (b *fileBucket) path(key string) (string, error) {
	clean := path.Clean(key)
	if key == "" || clean != key || path.IsAbs(key) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("file bucket: key %q is not a clean relative name", key)
	}
	return filepath.Join(b.dir, filepath.FromSlash(key)), nil
}

// notExist wraps err with ErrNoObject when it says a file does not exist.
func notExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNoObject, err)
	}
	return err
}

// WriteAll writes data to a temporary file beside the object, syncs it and
// renames it into place, so that a reader never sees part of it.
func (b *fileBucket) WriteAll(ctx context.Context, key string, data []byte) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

// ReadAll reads the object's file.
func (b *fileBucket) ReadAll(_ context.Context, key string) ([]byte, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	return data, notExist(err)
}

// List walks the directory of prefix. Temporary files (names starting
// with a dot) and fileblob's ".attrs" side files are not objects.
func (b *fileBucket) List(ctx context.Context, prefix string) ([]string, error) {
	root := b.dir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		root = filepath.Join(b.dir, filepath.FromSlash(prefix[:i]))
	}
	var keys []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll // nothing written under prefix yet
			}
			return notExist(err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".attrs") {
			return nil
		}
		rel, err := filepath.Rel(b.dir, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	return keys, err
}

// Delete removes the object's file, and fileblob's side file if any.
func (b *fileBucket) Delete(_ context.Context, key string) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return notExist(err)
	}
	if err := os.Remove(p + ".attrs"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Close does nothing: the bucket holds no open file.
func (b *fileBucket) Close() error { return nil }
