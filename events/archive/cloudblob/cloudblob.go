// Package cloudblob reaches the cloud object stores an archive may live in,
// s3://bucket?region=…, gs://bucket and azblob://container, through
// gocloud.dev/blob: importing it registers those schemes with package
// archive. It is the only importer of gocloud.dev, whose SDKs are most of a
// build's download: cmd/hookline imports it only in a build with
// -tags cloudarchive (the Docker image is one). Each store reads its
// credentials from its cloud's usual environment (AWS_*,
// GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*).
package cloudblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://container
	_ "gocloud.dev/blob/gcsblob"   // gs://bucket
	_ "gocloud.dev/blob/s3blob"    // s3://bucket?region=…
	"gocloud.dev/gcerrors"

	"github.com/hookline/hookline/events/archive"
)

func init() {
	for _, scheme := range []string{"s3", "gs", "azblob"} {
		archive.Register(scheme, func(ctx context.Context, u *url.URL) (archive.Bucket, error) {
			return Open(ctx, u.String())
		})
	}
}

// Open opens any bucket gocloud.dev/blob knows by URL as an archive.Bucket
// (the schemes of the drivers linked in: those above, and mem:// in tests).
func Open(ctx context.Context, rawURL string) (archive.Bucket, error) {
	b, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return bucket{b}, nil
}

// bucket adapts a *blob.Bucket; its errors of code NotFound wrap
// archive.ErrNoObject.
type bucket struct{ b *blob.Bucket }

var _ archive.Bucket = bucket{}

func translate(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", archive.ErrNoObject, err)
	}
	return err
}

func (c bucket) WriteAll(ctx context.Context, key string, data []byte) error {
	return translate(c.b.WriteAll(ctx, key, data, nil))
}

func (c bucket) ReadAll(ctx context.Context, key string) ([]byte, error) {
	data, err := c.b.ReadAll(ctx, key)
	return data, translate(err)
}

func (c bucket) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := c.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, translate(err)
		}
		keys = append(keys, obj.Key)
	}
}

func (c bucket) Delete(ctx context.Context, key string) error {
	return translate(c.b.Delete(ctx, key))
}

func (c bucket) Close() error { return c.b.Close() }
