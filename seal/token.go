package seal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
)

// TokenSize is the length of a token in bytes.
const TokenSize = 16

// Token returns a token standing for parts (an endpoint and an ordering
// key, say) in records that outlive the parts' own retention, and the id
// of the data key it is keyed by: the tenant's current one. The same
// parts give the same token while that key lives; once it is destroyed
// (the tenant is erased) nothing links a token to its parts, however
// guessable they are.
//
// The token is the first TokenSize bytes of the XChaCha20 key stream
// under the data key at a nonce digested from the tenant and parts: a
// pseudorandom function of them, computed with the cipher the key is
// already opened for. A nil *Payloads (a store without a vault, whose
// payloads are in clear too) returns a plain SHA-256 digest and no key
// id. It is safe for concurrent use.
func (p *Payloads) Token(ctx context.Context, tenantID string, parts ...string) ([]byte, string, error) {
	sum := tokenDigest(tenantID, parts)
	if p == nil {
		return sum[:TokenSize], "", nil
	}
	k, err := p.current(ctx, tenantID)
	if err != nil {
		return nil, "", err
	}
	nonce := sum[:k.aead.NonceSize()]
	stream := k.aead.Seal(nil, nonce, make([]byte, TokenSize), nil)
	return stream[:TokenSize], k.id, nil
}

// tokenDigest digests a token's inputs, each length-prefixed so that no
// two lists of parts run into each other.
func tokenDigest(tenantID string, parts []string) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte("hookline/token/v1"))
	for _, s := range append([]string{tenantID}, parts...) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
