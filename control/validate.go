package control

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"mime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/eventtype"
)

const (
	maxIDLen      = 64
	maxEventIDLen = 128
	// maxSchemaVersionLen bounds schema_version, sent as a header.
	maxSchemaVersionLen = 32
	// maxObjectIDLen bounds object_id.
	maxObjectIDLen = 256
	// maxContentTypeLen bounds content_type, sent as Content-Type.
	maxContentTypeLen = 128
	// endpointTagLen is the length of the tenant tag of a chosen endpoint
	// id, after its '_'; see scopedEndpointID.
	endpointTagLen = 10
	// maxEndpointNameLen bounds an endpoint id chosen by the client, so
	// that it and its tag fit in maxIDLen.
	maxEndpointNameLen = maxIDLen - 1 - endpointTagLen
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

// checkEventType validates the type of an event or of a catalog entry: a
// dotted name such as invoice.paid (package eventtype), never a pattern.
func checkEventType(field, typ string) error {
	if typ == "" {
		return invalid(field, "is required: a dotted name such as invoice.paid")
	}
	if err := eventtype.Check(typ); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

// checkPage validates a paging field (page_size, max, max_listed): 0 for
// def, or 1 to max. Negative and huge values are refused naming it.
func checkPage(field string, n int32, max, def int) error {
	if n < 0 || int(n) > max {
		return invalid(field, "is %d; give 1 to %d (0 means %d)", n, max, def)
	}
	return nil
}

// checkContentType validates a payload's media type, which every attempt
// sends as its Content-Type header: at most 128 characters of printable
// ASCII, parsed as a media type.
func checkContentType(ct string) error {
	if ct == "" {
		return nil
	}
	if len(ct) > maxContentTypeLen {
		return invalid("content_type", "is %d characters long; use at most %d", len(ct), maxContentTypeLen)
	}
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c < ' ' || c > '~' {
			return invalid("content_type", "has the byte 0x%02x at offset %d; use printable ASCII, for example application/json", c, i)
		}
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return invalid("content_type", "%q is not a media type (%v); for example application/json", ct, err)
	}
	return nil
}

// checkSchemaVersion validates schema_version, which every attempt sends
// as the webhook-schema-version header: empty, or 1 to 32 characters of
// printable ASCII without spaces, such as 2024-06-01 or v3.
func checkSchemaVersion(v string) error {
	if len(v) > maxSchemaVersionLen {
		return invalid("schema_version", "is %d characters long; use at most %d", len(v), maxSchemaVersionLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c > '~' {
			return invalid("schema_version", "has the byte 0x%02x at offset %d; use printable ASCII without spaces, such as 2024-06-01 or v3", c, i)
		}
	}
	return nil
}

// checkText validates free text that is stored and shown back: valid
// UTF-8 of at most max bytes, without control characters.
func checkText(field, v string, max int) error {
	if len(v) > max {
		return invalid(field, "is %d bytes long; use at most %d", len(v), max)
	}
	if !utf8.ValidString(v) {
		return invalid(field, "is not valid UTF-8")
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return invalid(field, "has a control character at offset %d; remove it", i)
	}
	return nil
}

// checkURLLength refuses an endpoint URL longer than the egress policy
// admits, before it reaches a grain.
func checkURLLength(field, u string) error {
	if len(u) > attempt.MaxURLLength {
		return invalid(field, "is %d characters long; use at most %d", len(u), attempt.MaxURLLength)
	}
	return nil
}

// scopedEndpointID turns an endpoint id chosen by a client into the
// endpoint's id: the name, '_' and a tag of ten base32 characters derived
// from the tenant and the name, for example orders_k3j2m4n5p6. Endpoint
// ids are one namespace across tenants (the grain and its stream are named
// by the id alone), so a name taken as given would let one tenant learn,
// from ALREADY_EXISTS, which names another uses. Scoped, two tenants
// choosing the same name get different ids, and a tenant that repeats a
// create gets its own id again (ALREADY_EXISTS). Ids that the server
// chooses (ep_ and 26 random characters) need no scope.
func scopedEndpointID(tenantID, name string) string {
	h := sha256.New()
	h.Write([]byte("hookline endpoint id\x00"))
	h.Write([]byte(tenantID))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return name + "_" + idEncoding.EncodeToString(h.Sum(nil))[:endpointTagLen]
}

// checkEndpointName validates an endpoint id chosen by a client at
// creation: 1 to 53 characters of [A-Za-z0-9_], leaving room for the
// tenant's tag.
func checkEndpointName(name string) error {
	if len(name) > maxEndpointNameLen {
		return invalid("endpoint_id", "is %d characters long; a chosen endpoint id has at most %d (the endpoint's id adds '_' and a %d-character tag)", len(name), maxEndpointNameLen, endpointTagLen)
	}
	return checkID("endpoint_id", name)
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

// Limits of a publish's headers.
const (
	maxHeaders        = 32
	maxHeaderNameLen  = 64
	maxHeaderValueLen = 512
)

// checkHeaders validates a publish's headers and returns them with their
// names in lower case: at most 32, names of [A-Za-z0-9-], values of
// printable ASCII up to 512 bytes. Two names that differ only in case are
// refused.
func checkHeaders(h map[string]string) (map[string]string, error) {
	if len(h) == 0 {
		return nil, nil
	}
	if len(h) > maxHeaders {
		return nil, invalid("headers", "has %d entries; send at most %d", len(h), maxHeaders)
	}
	out := make(map[string]string, len(h))
	for name, v := range h {
		if name == "" || len(name) > maxHeaderNameLen {
			return nil, invalid("headers", "name %q must be 1 to %d characters", name, maxHeaderNameLen)
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !isAlnum(c) && c != '-' {
				return nil, invalid("headers", "name %q has %q; use letters, digits and '-'", name, c)
			}
		}
		if len(v) > maxHeaderValueLen {
			return nil, invalid("headers", "value of %q is %d bytes; use at most %d", name, len(v), maxHeaderValueLen)
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' || c > '~' {
				return nil, invalid("headers", "value of %q has the byte 0x%02x at offset %d; use printable ASCII", name, c, i)
			}
		}
		lower := strings.ToLower(name)
		if _, dup := out[lower]; dup {
			return nil, invalid("headers", "names %q twice (names are case-insensitive)", lower)
		}
		out[lower] = v
	}
	return out, nil
}
