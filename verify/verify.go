package verify

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names, as in Standard Webhooks.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far the webhook-timestamp may be from the
// receiver's clock, in either direction, when Verifier.Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// Errors returned by [Verifier.Verify]; test them with errors.Is.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or
	// webhook-signature is absent or empty.
	ErrMissingHeaders = errors.New("verify: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrInvalidTimestamp: webhook-timestamp is not a Unix time in seconds.
	ErrInvalidTimestamp = errors.New("verify: webhook-timestamp is not a Unix time in seconds")
	// ErrTimestampTooOld: the message is older than the tolerance (a
	// replay, or a clock far behind).
	ErrTimestampTooOld = errors.New("verify: webhook-timestamp is too old")
	// ErrTimestampTooNew: the message is dated further in the future than
	// the tolerance.
	ErrTimestampTooNew = errors.New("verify: webhook-timestamp is too far in the future")
	// ErrNoMatchingSignature: no signature in the header matches any key.
	ErrNoMatchingSignature = errors.New("verify: no matching signature")
	// ErrInvalidKey: a configured secret or public key does not decode.
	ErrInvalidKey = errors.New("verify: invalid key")
)

// Verifier checks webhook signatures. Set Secrets (for v1, HMAC-SHA256),
// PublicKeys (for v1a, ed25519) or both; during a rotation list the old and
// the new key. The zero Tolerance means [DefaultTolerance]; a nil Now means
// time.Now.
//
// A Verifier is safe for concurrent use once it is no longer modified.
type Verifier struct {
	// Secrets are "whsec_" + base64 secrets; the prefix may be omitted.
	Secrets []string
	// PublicKeys are "whpk_" + base64 ed25519 public keys; the prefix may
	// be omitted.
	PublicKeys []string
	// Tolerance bounds the distance between webhook-timestamp and Now.
	Tolerance time.Duration
	// Now is the clock; tests inject one.
	Now func() time.Time
}

// New returns a Verifier for one or more "whsec_" secrets, checked now.
func New(secret string, more ...string) (*Verifier, error) {
	v := &Verifier{Secrets: append([]string{secret}, more...)}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return v, nil
}

// Validate reports whether every key decodes and at least one is set.
func (v *Verifier) Validate() error {
	if len(v.Secrets) == 0 && len(v.PublicKeys) == 0 {
		return fmt.Errorf("%w: no secret and no public key", ErrInvalidKey)
	}
	if v.Tolerance < 0 {
		return fmt.Errorf("verify: negative tolerance %v", v.Tolerance)
	}
	if _, err := v.secrets(); err != nil {
		return err
	}
	_, err := v.publicKeys()
	return err
}

func (v *Verifier) secrets() ([][]byte, error) {
	keys := make([][]byte, 0, len(v.Secrets))
	for i, s := range v.Secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(key) == 0 {
			// Never repeat the secret in the error.
			return nil, fmt.Errorf("%w: secret %d is not base64 after \"whsec_\"", ErrInvalidKey, i)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

func (v *Verifier) publicKeys() ([]ed25519.PublicKey, error) {
	keys := make([]ed25519.PublicKey, 0, len(v.PublicKeys))
	for i, s := range v.PublicKeys {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whpk_"))
		if err != nil || len(key) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: public key %d is not base64 of %d bytes after \"whpk_\"", ErrInvalidKey, i, ed25519.PublicKeySize)
		}
		keys = append(keys, ed25519.PublicKey(key))
	}
	return keys, nil
}

// Verify checks the webhook headers against body, the raw request body.
// It returns nil when the timestamp is within the tolerance and at least one
// signature in webhook-signature matches one of the keys; comparisons are
// constant-time. Unknown signature versions are skipped.
func (v *Verifier) Verify(headers http.Header, body []byte) error {
	id := headers.Get(HeaderID)
	tsText := headers.Get(HeaderTimestamp)
	sigs := headers.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tol := v.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	nowUnix := now().Unix()
	switch {
	case nowUnix-ts > int64(tol/time.Second):
		return fmt.Errorf("%w: %d s old, tolerance %v", ErrTimestampTooOld, nowUnix-ts, tol)
	case ts-nowUnix > int64(tol/time.Second):
		return fmt.Errorf("%w: %d s ahead, tolerance %v", ErrTimestampTooNew, ts-nowUnix, tol)
	}

	secrets, err := v.secrets()
	if err != nil {
		return err
	}
	publics, err := v.publicKeys()
	if err != nil {
		return err
	}

	msg := make([]byte, 0, len(id)+len(tsText)+len(body)+2)
	msg = append(msg, id...)
	msg = append(msg, '.')
	msg = append(msg, tsText...)
	msg = append(msg, '.')
	msg = append(msg, body...)

	macs := make([][]byte, len(secrets))
	for i, key := range secrets {
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		macs[i] = m.Sum(nil)
	}

	for _, entry := range strings.Fields(sigs) {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		switch version {
		case "v1":
			for _, mac := range macs {
				if hmac.Equal(sig, mac) {
					return nil
				}
			}
		case "v1a":
			for _, pub := range publics {
				if ed25519.Verify(pub, msg, sig) {
					return nil
				}
			}
		}
	}
	return ErrNoMatchingSignature
}
