package portal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// EndpointID is set on a pull token: it grants no capability, only
	// pulling that endpoint (see the control API's allow).
	EndpointID string `json:",omitempty"`
}

// Issuer is who issued a token (the event's issued_by).
type Issuer struct {
	Kind int32
	ID   string
}

// Has reports whether t grants capability c. A pull token grants none.
func (t Token) Has(c string) bool {
	return t.EndpointID == "" && (c == Read || slices.Contains(t.Capabilities, c))
}

// Active reports whether t opens the portal at now: not revoked, not
// expired.
func (t Token) Active(now time.Time) bool { return !t.Revoked && now.Before(t.ExpiresAt) }

// Tokens is the projection of portal tokens. Register it with a
// [projections.Runner] through [New]; its queries read the store and are
// safe for concurrent use with the runner.
//
// It keeps the tokens that may still open a portal: each issue forgets up
// to [PrunePerIssue] tokens that expired by its time (revoked ones too),
// oldest expiry first, so that the tokens kept stay about those issued
// within the last MaxTTL, however many sessions were ever opened.
type Tokens struct {
	store *projections.Store
}

// PrunePerIssue is the most expired tokens one issue forgets: more than
// one, so that the expired tokens never pile up while tokens are issued.
const PrunePerIssue = 8

// ErrBadCursor means a List cursor was not made by List.
var ErrBadCursor = errors.New("portal: malformed cursor")

// New registers a Tokens projection with r.
func New(r *projections.Runner) (*Tokens, error) {
	t := &Tokens{}
	return projections.Registered(r, t, func(s *projections.Store) { t.store = s })
}

// Name implements [projections.Projection]. It became "portal_tokens.v2"
// when tokens got their indexes by expiry (to forget them) and by
// creation (to page a tenant's list): a store of before is rebuilt from
// the log.
func (*Tokens) Name() string { return "portal_tokens.v2" }

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
				IssuedBy:   Issuer{Kind: int32(m.GetIssuedBy().GetKind()), ID: m.GetIssuedBy().GetId()},
				EndpointID: m.GetEndpointId(),
			},
			Hash: m.GetTokenSha256(),
		}
		// The issue's own time, not the clock: every node forgets the
		// same tokens, and a rebuild forgets them again.
		if err := prune(b, tok.CreatedAt); err != nil {
			return err
		}
		return putToken(b, tok)
	case *hooklinev1.PortalTokenRevoked:
		tok, ok, err := getRecord(b, m.GetTokenId())
		if err != nil || !ok {
			return err
		}
		tok.Revoked = true
		if err := put(b, idKey(tok.ID), tok); err != nil {
			return err
		}
		return b.Delete(hashKey(tok.Hash))
	}
	return nil
}

// prune forgets up to PrunePerIssue tokens that expired by now (expires
// at or before it).
func prune(b *projections.Batch, now time.Time) error {
	var keys [][]byte
	err := b.Scan([]byte{'x'}, expiryKey(now.Add(time.Nanosecond), ""), func(key, _ []byte) (bool, error) {
		keys = append(keys, slices.Clone(key))
		return len(keys) < PrunePerIssue, nil
	})
	if err != nil {
		return fmt.Errorf("prune portal tokens: %w", err)
	}
	for _, key := range keys {
		id, _, err := projections.ReadString(key[1+8:])
		if err != nil {
			return fmt.Errorf("prune portal tokens: %w", err)
		}
		tok, ok, err := getRecord(b, id)
		if err != nil {
			return err
		}
		if !ok { // an index entry without its token: drop the entry
			if err := b.Delete(key); err != nil {
				return err
			}
			continue
		}
		if err := deleteToken(b, tok); err != nil {
			return err
		}
	}
	return nil
}

func putToken(b *projections.Batch, tok record) error {
	if err := put(b, idKey(tok.ID), tok); err != nil {
		return err
	}
	for _, k := range [][]byte{tenantKey(tok.TenantID, tok.CreatedAt, tok.ID), expiryKey(tok.ExpiresAt, tok.ID)} {
		if err := b.Set(k, nil); err != nil {
			return err
		}
	}
	return b.Set(hashKey(tok.Hash), []byte(tok.ID))
}

func deleteToken(b *projections.Batch, tok record) error {
	for _, k := range [][]byte{idKey(tok.ID), hashKey(tok.Hash), tenantKey(tok.TenantID, tok.CreatedAt, tok.ID), expiryKey(tok.ExpiresAt, tok.ID)} {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// ByHash returns the token whose SHA-256 is hash; ok is false when none
// was issued, it was revoked, or it expired and was forgotten. The caller
// checks its expiry.
func (t *Tokens) ByHash(hash []byte) (Token, bool, error) {
	id, ok, err := t.store.Get(hashKey(hash))
	if err != nil || !ok {
		return Token{}, false, err
	}
	return t.Get(string(id))
}

// Get returns a token by id; ok is false when there is none (never issued,
// or expired and forgotten).
func (t *Tokens) Get(id string) (Token, bool, error) {
	r, ok, err := getRecord(t.store, id)
	return r.Token, ok, err
}

// List returns up to limit of a tenant's tokens (limit <= 0: 100), newest
// first, after the token that cursor names ("" for the first page); keep
// says which to return (nil: all). next is the cursor of the following
// page, "" after the last one. A page reads at most 10·limit tokens, so
// it may hold fewer than limit when keep refuses many; next goes on from
// there. A malformed cursor fails with [ErrBadCursor].
func (t *Tokens) List(tenantID, cursor string, limit int, keep func(Token) bool) (toks []Token, next string, err error) {
	if limit <= 0 {
		limit = 100
	}
	prefix := tenantPrefix(tenantID)
	lower := prefix
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(after) < 8 {
			return nil, "", ErrBadCursor
		}
		lower = append(append(slices.Clone(prefix), after...), 0) // just past it
	}
	read := 0
	var last []byte
	err = t.store.Scan(lower, projections.PrefixEnd(prefix), func(key, _ []byte) (bool, error) {
		if len(toks) == limit || read == 10*limit {
			next = base64.RawURLEncoding.EncodeToString(last)
			return false, nil
		}
		read++
		last = slices.Clone(key[len(prefix):])
		id, _, err := projections.ReadString(key[len(prefix)+8:])
		if err != nil {
			return false, err
		}
		tok, ok, err := t.Get(id)
		if err != nil || !ok {
			return err == nil, err
		}
		if keep == nil || keep(tok) {
			toks = append(toks, tok)
		}
		return true, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list portal tokens of %s: %w", tenantID, err)
	}
	return toks, next, nil
}

// record is a token as stored: the token and its hash, to drop the hash's
// index entry on revocation.
type record struct {
	Token
	Hash []byte
}

// getter reads the store, or a batch with its own writes.
type getter interface {
	Get(key []byte) ([]byte, bool, error)
}

func getRecord(g getter, id string) (record, bool, error) {
	data, ok, err := g.Get(idKey(id))
	if err != nil || !ok {
		return record{}, false, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, false, fmt.Errorf("decode portal token %s: %w", id, err)
	}
	return r, true, nil
}

// The keys: a token by id ('i'), its id by hash ('h'), a tenant's tokens
// newest first ('n', tenant, creation time descending, id), every token by
// expiry ('x', expiry, id).
func idKey(id string) []byte       { return projections.AppendString([]byte{'i'}, id) }
func hashKey(h []byte) []byte      { return append([]byte{'h'}, h...) }
func tenantPrefix(t string) []byte { return projections.AppendString([]byte{'n'}, t) }
func tenantKey(t string, created time.Time, id string) []byte {
	return projections.AppendString(projections.AppendTimeDesc(tenantPrefix(t), created), id)
}

// expiryKey is the expiry index's key of id; with id "" it bounds the
// entries that expire before at.
func expiryKey(at time.Time, id string) []byte {
	k := projections.AppendTime([]byte{'x'}, at)
	if id == "" {
		return k
	}
	return projections.AppendString(k, id)
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
