package archive

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Bucket is the object store an archive keeps its segments and indexes in.
// Keys are slash-separated names ("segments/….zst"). Implementations are
// safe for concurrent use. Like events.Log, it is the one interface several
// backends implement: the file bucket here, the cloud stores in package
// cloudblob.
type Bucket interface {
	// WriteAll writes the object key whole: a reader sees all of data or
	// the object as it was before, never part of it.
	WriteAll(ctx context.Context, key string, data []byte) error
	// ReadAll reads the object key; one that does not exist fails with
	// an error wrapping ErrNoObject.
	ReadAll(ctx context.Context, key string) ([]byte, error)
	// List returns the keys that start with prefix, in lexical order. An
	// object deleted while the listing runs may fail it with an error
	// wrapping ErrNoObject.
	List(ctx context.Context, prefix string) ([]string, error)
	// Delete deletes the object key; one that does not exist fails with an
	// error wrapping ErrNoObject.
	Delete(ctx context.Context, key string) error
	// Close releases the bucket.
	Close() error
}

// ErrNoObject is the error a Bucket wraps when an object does not exist.
var ErrNoObject = errors.New("archive: no such object")

// Opener opens the bucket a URL names.
type Opener func(ctx context.Context, u *url.URL) (Bucket, error)

// openers are the bucket URL schemes Open knows; mu guards the map.
var (
	mu      sync.Mutex
	openers = map[string]Opener{"file": openFile}
)

// Register makes Open reach buckets of scheme through open: package
// cloudblob registers s3, gs and azblob (cmd/hookline imports it in a build
// with -tags cloudarchive). It panics if scheme is registered twice.
func Register(scheme string, open Opener) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("archive: scheme " + scheme + " registered twice")
	}
	openers[scheme] = open
}

// OpenBucket opens the bucket at rawURL by its scheme: file://, or a
// scheme a package registered (see [Register]).
func OpenBucket(ctx context.Context, rawURL string) (Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	mu.Lock()
	open, ok := openers[u.Scheme]
	schemes := make([]string, 0, len(openers))
	for s := range openers {
		schemes = append(schemes, s+"://")
	}
	mu.Unlock()
	if !ok {
		slices.Sort(schemes)
		return nil, fmt.Errorf("no bucket of scheme %q in this build (it knows %s; s3://, gs:// and azblob:// need a build with -tags cloudarchive, as the Docker image is)",
			u.Scheme, strings.Join(schemes, ", "))
	}
	return open(ctx, u)
}
