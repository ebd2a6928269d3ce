//go:build cloudarchive

package main

// The cloud object stores `serve --archive` reaches by URL, besides
// file:// (which package events/archive registers), in a build with
// -tags cloudarchive (the Docker image is one): their SDKs would double
// the size of every other build. Each reads its credentials from its
// cloud's usual environment (AWS_*, GOOGLE_APPLICATION_CREDENTIALS,
// AZURE_STORAGE_*).
import (
	_ "gocloud.dev/blob/azureblob" // azblob://container
	_ "gocloud.dev/blob/gcsblob"   // gs://bucket
	_ "gocloud.dev/blob/s3blob"    // s3://bucket?region=…
)
