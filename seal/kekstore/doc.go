// Package kekstore keeps the vault's key-encryption keys apart from the
// vault (see seal.KEKStore): in a directory of its own (file:///path), or
// in object storage (s3://, gs://, azblob://: package archive's buckets, in a
// build with -tags cloudarchive, which registers them). Each KEK is one file or object,
// <id>.kek, already sealed under the master key by package seal; deleting
// it destroys the KEK, which is the point: keep the store out of
// long-kept backups, and an object store without versioning.
package kekstore
