package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// KeySize is the size of a master key in bytes (AES-256).
const KeySize = 32

// NonceSize is the size of the nonce that [Keyring.Seal] returns.
const NonceSize = 12

var (
	// ErrUnknownKey means a sealed value names a master key that the keyring
	// does not hold: it was removed (crypto-shredded) or never loaded.
	ErrUnknownKey = errors.New("seal: unknown master key")
	// ErrOpen means a sealed value did not open: wrong key, wrong AAD
	// (moved to another endpoint or version) or tampered bytes.
	ErrOpen = errors.New("seal: cannot open sealed value")
	// ErrKey means a master key or its specification is malformed.
	ErrKey = errors.New("seal: malformed master key")
)

// Key is one master key and its id.
type Key struct {
	// ID names the key in sealed values; [KeyID] of Secret when empty.
	ID string
	// Secret is the 32-byte AES-256 key.
	Secret []byte
}

// Keyring holds the current master key and older ones by id. A Keyring is
// immutable once built and safe for concurrent use; its zero value is not
// usable: build one with [NewKeyring], [ParseKeys] or [LoadKeyring].
type Keyring struct {
	current string
	ids     []string // current first
	aeads   map[string]cipher.AEAD
	rand    io.Reader
}

// KeyID returns the default id of a master key: "mk_" and the first 12 hex
// digits of a domain-separated SHA-256 of the key. It identifies the key
// without revealing anything usable about it.
func KeyID(secret []byte) string {
	h := sha256.New()
	h.Write([]byte("hookline master key id\x00"))
	h.Write(secret)
	return "mk_" + hex.EncodeToString(h.Sum(nil))[:12]
}

// NewKeyring returns a keyring whose current key is the first of keys; the
// others are older keys that only open. Ids must be unique: 1 to 64
// characters of [A-Za-z0-9_.-].
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKey)
	}
	kr := &Keyring{aeads: make(map[string]cipher.AEAD, len(keys)), rand: rand.Reader}
	for i, k := range keys {
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("%w: key %d is %d bytes, want %d (base64 of 32 random bytes)", ErrKey, i+1, len(k.Secret), KeySize)
		}
		id := k.ID
		if id == "" {
			id = KeyID(k.Secret)
		}
		if !validID(id) {
			return nil, fmt.Errorf("%w: key %d: id %q must be 1 to 64 characters of [A-Za-z0-9_.-]", ErrKey, i+1, id)
		}
		if _, dup := kr.aeads[id]; dup {
			return nil, fmt.Errorf("%w: key %d: id %q given twice", ErrKey, i+1, id)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrKey, i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrKey, i+1, err)
		}
		kr.aeads[id] = aead
		kr.ids = append(kr.ids, id)
	}
	kr.current = kr.ids[0]
	return kr, nil
}

// ParseKeys parses the HOOKLINE_MASTER_KEY format: one or more keys
// separated by commas, the first one current, each either "base64" (its id is
// [KeyID]) or "id:base64". The base64 is standard or URL-safe, padded or not,
// and decodes to 32 bytes. Errors name the key by its position, never by its
// value.
func ParseKeys(spec string) (*Keyring, error) {
	var keys []Key
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%w: key %d is empty (separate keys with single commas)", ErrKey, i+1)
		}
		id, b64, ok := strings.Cut(part, ":")
		if !ok {
			id, b64 = "", part
		} else if id == "" {
			return nil, fmt.Errorf("%w: key %d has an empty id before ':'", ErrKey, i+1)
		}
		secret, err := decodeBase64(b64)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d is not base64 (generate one with: head -c 32 /dev/urandom | base64)", ErrKey, i+1)
		}
		keys = append(keys, Key{ID: id, Secret: secret})
	}
	return NewKeyring(keys...)
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// CurrentID returns the id of the key that [Keyring.Seal] uses.
func (k *Keyring) CurrentID() string { return k.current }

// IDs returns the ids of the keys held, the current one first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// Has reports whether the keyring holds the key named id.
func (k *Keyring) Has(id string) bool { _, ok := k.aeads[id]; return ok }

// Seal encrypts plaintext under the current key with a fresh random nonce,
// authenticating aad with it. It returns the key id to record beside the
// nonce and ciphertext.
func (k *Keyring) Seal(plaintext, aad []byte) (keyID string, nonce, ciphertext []byte, err error) {
	aead := k.aeads[k.current]
	nonce = make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(k.rand, nonce); err != nil {
		return "", nil, nil, fmt.Errorf("seal: read nonce: %w", err)
	}
	return k.current, nonce, aead.Seal(nil, nonce, plaintext, aad), nil
}

// Open decrypts what [Keyring.Seal] returned. It fails with [ErrUnknownKey]
// when keyID is not in the keyring and with [ErrOpen] when the value does not
// authenticate (wrong key, wrong aad, altered bytes).
func (k *Keyring) Open(keyID string, nonce, ciphertext, aad []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKey, keyID)
	}
	if len(nonce) != aead.NonceSize() {
		return nil, fmt.Errorf("%w: nonce is %d bytes, want %d", ErrOpen, len(nonce), aead.NonceSize())
	}
	plain, err := aead.Open(nil, nonce, ciphertext, aad)
	if err != nil {
		return nil, fmt.Errorf("%w under key %q", ErrOpen, keyID)
	}
	return plain, nil
}

// SecretAAD is the additional data that binds an endpoint's signing secret
// of a version to that endpoint and version.
func SecretAAD(endpointID string, version int32) []byte {
	return fmt.Appendf(nil, "endpoint/%s/secret/%d", endpointID, version)
}

// SeedAAD is the additional data that binds an endpoint's ed25519 seed of a
// version to that endpoint and version.
func SeedAAD(endpointID string, version int32) []byte {
	return fmt.Appendf(nil, "endpoint/%s/ed25519/%d", endpointID, version)
}

// HeaderAAD is the additional data that binds the value of an endpoint's
// secret header to that endpoint and header name.
func HeaderAAD(endpointID, name string) []byte {
	return fmt.Appendf(nil, "endpoint/%s/header/%s", endpointID, name)
}

// OAuth2SecretAAD is the additional data that binds an endpoint's OAuth2
// client secret to that endpoint.
func OAuth2SecretAAD(endpointID string) []byte {
	return fmt.Appendf(nil, "endpoint/%s/oauth2/client_secret", endpointID)
}

// MTLSKeyAAD is the additional data that binds an endpoint's client
// certificate key to that endpoint.
func MTLSKeyAAD(endpointID string) []byte {
	return fmt.Appendf(nil, "endpoint/%s/mtls/client_key", endpointID)
}

// URLPasswordAAD is the additional data that binds the password (or
// token) of an endpoint's broker URL to that endpoint.
func URLPasswordAAD(endpointID string) []byte {
	return fmt.Appendf(nil, "endpoint/%s/url/password", endpointID)
}

// String describes the keyring by its key ids only, so that printing it
// never shows a key.
func (k *Keyring) String() string {
	return fmt.Sprintf("seal.Keyring{current: %s, keys: %s}", k.current, strings.Join(k.ids, ","))
}
