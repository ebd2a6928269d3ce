package control

import (
	"crypto/rand"
	"encoding/base32"
	"mime"
	"strings"
)

const (
	maxIDLen        = 64
	maxEventIDLen   = 128
	maxEventTypeLen = 128
)

// checkID validates an identifier chosen by a client (tenant_id,
// endpoint_id): 1 to 64 characters of [A-Za-z0-9_]. Stream names are built
// from these, so '-' and '.' are reserved.
func checkID(field, id string) error {
	if id == "" {
		return invalid(field, "is empty")
	}
	if len(id) > maxIDLen {
		return invalid(field, "is %d characters long; use at most %d", len(id), maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !isAlnum(id[i]) && id[i] != '_' {
			return invalid(field, "has %q at offset %d; use only letters, digits and '_'", id[i], i)
		}
	}
	return nil
}

// checkEventID validates a producer's event_id: 1 to 128 characters of
// [A-Za-z0-9._:-].
func checkEventID(id string) error {
	if id == "" {
		return invalid("event_id", "is required: give each event a stable id, unique per tenant (for example the outbox row id)")
	}
	if len(id) > maxEventIDLen {
		return invalid("event_id", "is %d characters long; use at most %d", len(id), maxEventIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !isAlnum(c) && !strings.ContainsRune("._:-", rune(c)) {
			return invalid("event_id", "has %q at offset %d; use only letters, digits and . _ : -", c, i)
		}
	}
	return nil
}

// checkEventType validates a dotted event type such as invoice.paid: segments
// of [A-Za-z0-9_-] separated by single dots. "*" is reserved for endpoints
// that subscribe to every type.
func checkEventType(field, typ string) error {
	if typ == "" {
		return invalid(field, "is required: a dotted name such as invoice.paid")
	}
	if len(typ) > maxEventTypeLen {
		return invalid(field, "is %d characters long; use at most %d", len(typ), maxEventTypeLen)
	}
	for _, seg := range strings.Split(typ, ".") {
		if seg == "" {
			return invalid(field, "%q has an empty segment; use a dotted name such as invoice.paid", typ)
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !isAlnum(c) && c != '_' && c != '-' {
				return invalid(field, "%q has %q; use letters, digits, '_' and '-' between dots", typ, c)
			}
		}
	}
	return nil
}

func checkContentType(ct string) error {
	if ct == "" {
		return nil
	}
	if len(ct) > 128 {
		return invalid("content_type", "is longer than 128 characters")
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return invalid("content_type", "%q is not a media type (%v); for example application/json", ct, err)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns prefix + 16 random bytes in lower-case base32.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return prefix + idEncoding.EncodeToString(b[:])
}
