package tenant

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// KeyPrefix starts every API key.
const KeyPrefix = "hk_"

// KeyIDPrefix starts every API key id.
const KeyIDPrefix = "key_"

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewKey returns a new API key, "hk_" + base64url of 32 bytes read from rand,
// and a new key id, "key_" + 16 base32 characters from 10 more bytes. The key
// is shown once; only [HashKey] of it is recorded.
func NewKey(rand io.Reader) (key, keyID string, err error) {
	var b [42]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", "", fmt.Errorf("new api key: %w", err)
	}
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:32])
	keyID = KeyIDPrefix + strings.ToLower(idEncoding.EncodeToString(b[32:]))
	return key, keyID, nil
}

// HashKey returns the SHA-256 of an API key, as recorded in ApiKeyIssued
// (key_sha256). Authentication hashes the presented key and looks it up.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}
