package portal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Capabilities of a portal token. Read is always granted.
const (
	Read            = "read"
	ManageEndpoints = "manage_endpoints"
	Replay          = "replay"
)

// Capabilities lists every capability, in the order the API shows them.
var Capabilities = []string{Read, ManageEndpoints, Replay}

// Category is the stream category of portal tokens: one stream per token,
// portal-{token_id}, written by the control API's portal handler; it
// expires with the log's retention (events.Expires).
const Category = events.PortalCategory

// TokenPrefix starts every portal token, so that authentication tells it
// from an API key without a lookup.
const TokenPrefix = "hlp_"

// MaxTTL bounds a token's life; DefaultTTL is its life when none is asked.
const (
	MaxTTL     = 24 * time.Hour
	DefaultTTL = time.Hour
)

// Stream names the stream of one portal token.
func Stream(tokenID string) string { return Category + "-" + tokenID }

// Hash returns the SHA-256 of a token, the form in which it is recorded
// and looked up.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewToken returns a new token id (ptk_…, safe to show and log) and the
// token itself (hlp_…, a secret: show it once, never log it).
func NewToken() (id, token string) {
	var idb [10]byte
	var secret [32]byte
	_, _ = rand.Read(idb[:]) // crypto/rand.Read never fails (Go 1.24+).
	_, _ = rand.Read(secret[:])
	return "ptk_" + encoding.EncodeToString(idb[:]), TokenPrefix + encoding.EncodeToString(secret[:])
}

// Token is a portal token as the projection knows it (never its value).
type Token struct {
	ID           string
	TenantID     string
	Capabilities []string
	Label        string
	CreatedAt    time.Time
	ExpiresAt    time.Time
	Revoked      bool
	IssuedBy     Issuer
}

// Issuer is who issued a token (the event's issued_by).
type Issuer struct {
	Kind int32
	ID   string
}

// Has reports whether t grants capability c.
func (t Token) Has(c string) bool { return c == Read || slices.Contains(t.Capabilities, c) }

// Active reports whether t opens the portal at now: not revoked, not
// expired.
func (t Token) Active(now time.Time) bool { return !t.Revoked && now.Before(t.ExpiresAt) }

// Tokens is the projection of portal tokens. Register it with a
// [projections.Runner] through [New]; its queries read the store and are
// safe for concurrent use with the runner.
type Tokens struct {
	store *projections.Store
}

// New registers a Tokens projection with r.
func New(r *projections.Runner) (*Tokens, error) {
	t := &Tokens{}
	s, err := r.Register(t)
	if err != nil {
		return nil, err
	}
	t.store = s
	return t, nil
}

// Name implements [projections.Projection].
func (*Tokens) Name() string { return "portal_tokens" }

// Filter implements [projections.Projection].
func (*Tokens) Filter() events.Filter {
	return events.Filter{StreamPrefixes: []string{Category + "-"}, Types: []string{"PortalTokenIssued", "PortalTokenRevoked"}}
}

// Apply implements [projections.Projection].
func (t *Tokens) Apply(b *projections.Batch, _ *events.Record, msg proto.Message) error {
	switch m := msg.(type) {
	case *hooklinev1.PortalTokenIssued:
		tok := record{
			Token: Token{
				ID: m.GetTokenId(), TenantID: m.GetTenantId(), Capabilities: m.GetCapabilities(), Label: m.GetLabel(),
				CreatedAt: asTime(m.GetAt()), ExpiresAt: asTime(m.GetExpiresAt()),
				IssuedBy: Issuer{Kind: int32(m.GetIssuedBy().GetKind()), ID: m.GetIssuedBy().GetId()},
			},
			Hash: m.GetTokenSha256(),
		}
		if err := put(b, idKey(tok.ID), tok); err != nil {
			return err
		}
		if err := b.Set(tenantKey(tok.TenantID, tok.ID), nil); err != nil {
			return err
		}
		return b.Set(hashKey(tok.Hash), []byte(tok.ID))
	case *hooklinev1.PortalTokenRevoked:
		var tok record
		data, ok, err := b.Get(idKey(m.GetTokenId()))
		if err != nil || !ok {
			return err
		}
		if err := json.Unmarshal(data, &tok); err != nil {
			return fmt.Errorf("decode portal token %s: %w", m.GetTokenId(), err)
		}
		tok.Revoked = true
		if err := put(b, idKey(tok.ID), tok); err != nil {
			return err
		}
		return b.Delete(hashKey(tok.Hash))
	}
	return nil
}

// ByHash returns the token whose SHA-256 is hash; ok is false when none
// was issued or it was revoked. The caller checks its expiry.
func (t *Tokens) ByHash(hash []byte) (Token, bool, error) {
	id, ok, err := t.store.Get(hashKey(hash))
	if err != nil || !ok {
		return Token{}, false, err
	}
	return t.Get(string(id))
}

// Get returns a token by id; ok is false when there is none.
func (t *Tokens) Get(id string) (Token, bool, error) {
	data, ok, err := t.store.Get(idKey(id))
	if err != nil || !ok {
		return Token{}, false, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return Token{}, false, fmt.Errorf("decode portal token %s: %w", id, err)
	}
	return r.Token, true, nil
}

// List returns a tenant's tokens, newest first.
func (t *Tokens) List(tenantID string) ([]Token, error) {
	ids, err := t.store.IDs(tenantPrefix(tenantID))
	if err != nil {
		return nil, fmt.Errorf("list portal tokens of %s: %w", tenantID, err)
	}
	out := make([]Token, 0, len(ids))
	for _, id := range ids {
		tok, ok, err := t.Get(id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, tok)
		}
	}
	slices.SortFunc(out, func(a, b Token) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// record is a token as stored: the token and its hash, to drop the hash's
// index entry on revocation.
type record struct {
	Token
	Hash []byte
}

func idKey(id string) []byte       { return projections.AppendString([]byte{'i'}, id) }
func hashKey(h []byte) []byte      { return append([]byte{'h'}, h...) }
func tenantPrefix(t string) []byte { return projections.AppendString([]byte{'n'}, t) }
func tenantKey(t, id string) []byte {
	return projections.AppendString(tenantPrefix(t), id)
}

func put(b *projections.Batch, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return b.Set(key, data)
}

func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
