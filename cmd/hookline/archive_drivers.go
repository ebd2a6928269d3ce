//go:build cloudarchive

package main

// The cloud object stores `serve --archive` reaches by URL, besides
// file://, in a build with -tags cloudarchive (the Docker image is one):
// s3://, gs://, azblob://. Their SDKs are most of what a build downloads
// (google.golang.org/api alone is 400 MB unpacked) and would double the
// binary, so the default build leaves them out.
import _ "github.com/hookline/hookline/events/archive/cloudblob"
