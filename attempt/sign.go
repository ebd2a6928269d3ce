package attempt

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Prefixes of the encoded keys, as in Standard Webhooks.
const (
	SecretPrefix    = "whsec_" // HMAC secret: "whsec_" + base64 of the key bytes
	PublicKeyPrefix = "whpk_"  // ed25519 public key: "whpk_" + base64 of 32 bytes
)

// Secret sizes in bytes. NewSecret makes SecretSize; ParseSecret accepts
// MinSecretSize to MaxSecretSize.
const (
	SecretSize    = 32
	MinSecretSize = 24
	MaxSecretSize = 64
)

// ErrInvalidSecret reports a secret that is not "whsec_" + base64 of 24 to
// 64 bytes.
var ErrInvalidSecret = errors.New("attempt: invalid signing secret")

// ErrInvalidSigningKey reports an ed25519 seed that is not 32 bytes.
var ErrInvalidSigningKey = errors.New("attempt: invalid ed25519 signing key")

// Secret is one live HMAC signing secret of an endpoint. During a rotation
// overlap an endpoint has several, and each one signs.
type Secret struct {
	// Version counts the endpoint's secrets; it is sent in
	// webhook-key-version so a receiver can tell which one it holds.
	Version int32
	// Key is the decoded secret (the bytes after "whsec_").
	Key []byte
}

// NewSecret returns a new secret, "whsec_" + base64 of 32 bytes read from
// rand (crypto/rand.Reader in production).
func NewSecret(rand io.Reader) (string, error) {
	key := make([]byte, SecretSize)
	if _, err := io.ReadFull(rand, key); err != nil {
		return "", fmt.Errorf("new secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// ParseSecret decodes a "whsec_" secret into the HMAC key bytes. The error
// matches [ErrInvalidSecret] and never repeats the secret.
func ParseSecret(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: it must start with %q", ErrInvalidSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: it is not standard base64 after %q", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) < MinSecretSize || len(key) > MaxSecretSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d to %d", ErrInvalidSecret, len(key), MinSecretSize, MaxSecretSize)
	}
	return key, nil
}

// NewSigningKey returns a new ed25519 private key as its 32-byte seed, read
// from rand. The seed is what is stored (sealed); [PublicKey] gives what the
// customer receives.
func NewSigningKey(rand io.Reader) ([]byte, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return nil, fmt.Errorf("new signing key: %w", err)
	}
	return seed, nil
}

// PublicKey returns the public key of an ed25519 seed as "whpk_" + base64.
// It panics if seed is not 32 bytes, like ed25519.NewKeyFromSeed.
func PublicKey(seed []byte) string {
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// Sign returns the value of the webhook-signature header for one attempt:
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>" for every secret, in
// order, separated by spaces, then "v1a,<base64 ed25519 signature>" of the
// same content when seed is not nil. The timestamp is the attempt's Unix
// seconds, the same value sent in webhook-timestamp.
//
// Sign is safe for concurrent use; the result is a signature, so never log it.
func Sign(id string, timestamp time.Time, body []byte, secrets []Secret, seed []byte) (string, error) {
	if len(secrets) == 0 && seed == nil {
		return "", errors.New("sign: no secret and no signing key")
	}
	if seed != nil && len(seed) != ed25519.SeedSize {
		return "", fmt.Errorf("%w: seed is %d bytes, want %d", ErrInvalidSigningKey, len(seed), ed25519.SeedSize)
	}
	ts := strconv.FormatInt(timestamp.Unix(), 10)

	var b strings.Builder
	b.Grow(len(secrets)*48 + 92)
	var sum [sha256.Size]byte
	var enc [44]byte // base64 of 32 bytes
	for i, s := range secrets {
		if len(s.Key) == 0 {
			return "", fmt.Errorf("%w: secret version %d is empty", ErrInvalidSecret, s.Version)
		}
		mac := hmac.New(sha256.New, s.Key)
		io.WriteString(mac, id)
		io.WriteString(mac, ".")
		io.WriteString(mac, ts)
		io.WriteString(mac, ".")
		mac.Write(body)
		base64.StdEncoding.Encode(enc[:], mac.Sum(sum[:0]))
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.Write(enc[:])
	}
	if seed != nil {
		msg := make([]byte, 0, len(id)+len(ts)+len(body)+2)
		msg = append(msg, id...)
		msg = append(msg, '.')
		msg = append(msg, ts...)
		msg = append(msg, '.')
		msg = append(msg, body...)
		sig := ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg)
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1a,")
		b.WriteString(base64.StdEncoding.EncodeToString(sig))
	}
	return b.String(), nil
}
