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
	// HeaderPrefix replaces "webhook-" in the names of the three headers
	// read, for an endpoint whose header_prefix is set ("svix-"); empty
	// means "webhook-".
	HeaderPrefix string
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
// constant-time. As in the specification and its reference library, the
// signatures are separated by single spaces (a tab or a newline does not
// separate them), each "version,base64", and webhook-timestamp is the
// decimal text that was signed. Unknown versions and malformed entries are
// skipped.
func (v *Verifier) Verify(headers http.Header, body []byte) error {
	id, tsText, sigs := headers.Get(HeaderID), headers.Get(HeaderTimestamp), headers.Get(HeaderSignature)
	if p := v.HeaderPrefix; p != "" {
		id, tsText, sigs = headers.Get(p+"id"), headers.Get(p+"timestamp"), headers.Get(p+"signature")
	}
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, ok := parseTimestamp(tsText)
	if !ok {
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

	// v1 signatures are compared as base64 text, as the reference library
	// does, so that only the canonical encoding of a MAC matches.
	macs := make([][]byte, len(secrets))
	for i, key := range secrets {
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		macs[i] = base64.StdEncoding.AppendEncode(nil, m.Sum(nil))
	}

	// The list is separated by single spaces (Standard Webhooks); any
	// other whitespace is part of an entry, which then matches nothing.
	for entry := range strings.SplitSeq(sigs, " ") {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok {
			continue
		}
		switch version {
		case "v1":
			for _, mac := range macs {
				if hmac.Equal([]byte(encoded), mac) {
					return nil
				}
			}
		case "v1a":
			sig, ok := decodeCanonical(encoded)
			if !ok {
				continue
			}
			for _, pub := range publics {
				if ed25519.Verify(pub, msg, sig) {
					return nil
				}
			}
		}
	}
	return ErrNoMatchingSignature
}

// parseTimestamp reads webhook-timestamp: Unix seconds in canonical decimal
// (digits only, no sign, no leading zero), the text that was signed. A
// value such as "+1614265330" or "01614265330" would name the same second
// with other bytes, and is refused.
func parseTimestamp(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	return ts, err == nil
}

// decodeCanonical decodes standard base64 and accepts it only in its one
// canonical form: Go's decoder skips CR and LF and, unless strict, ignores
// the unused bits of the last character.
func decodeCanonical(s string) ([]byte, bool) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}
