package attempt

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// DefaultHeaderPrefix starts the names of the headers Hookline sets on an
// attempt (Standard Webhooks: webhook-id, webhook-timestamp,
// webhook-signature, …).
const DefaultHeaderPrefix = "webhook-"

// Limits on an endpoint's static headers and header prefix.
const (
	MaxHeaders         = 20
	MaxHeaderNameLen   = 64
	MaxHeaderValueLen  = 1024
	MaxHeaderPrefixLen = 32
)

// reservedHeaders are set by Hookline or by HTTP itself: an endpoint's
// static headers may not name them (lower case).
var reservedHeaders = map[string]bool{
	"host": true, "content-type": true, "content-length": true, "transfer-encoding": true,
	"connection": true, "keep-alive": true, "te": true, "trailer": true, "upgrade": true,
	"proxy-authorization": true, "proxy-connection": true, "expect": true,
	"user-agent": true, "traceparent": true, "tracestate": true,
}

// CheckHeaderPrefix reports whether prefix may name the headers Hookline
// sets: empty (the default), or 2 to MaxHeaderPrefixLen letters, digits
// and hyphens, ending with a hyphen.
func CheckHeaderPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) < 2 || len(prefix) > MaxHeaderPrefixLen || !strings.HasSuffix(prefix, "-") ||
		strings.IndexFunc(prefix, func(r rune) bool {
			return !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) >= 0 {
		return fmt.Errorf("is %q; use 2 to %d letters, digits and hyphens ending with a hyphen, e.g. \"svix-\" (empty means %q)", prefix, MaxHeaderPrefixLen, DefaultHeaderPrefix)
	}
	return nil
}

// CheckHeaders reports whether headers may be sent as an endpoint's static
// headers beside the headers that prefix names: at most MaxHeaders, each
// name an HTTP token that Hookline or HTTP does not set, each value a
// valid header value of at most MaxHeaderValueLen bytes. Names are
// compared without case: two that differ only in case are refused.
func CheckHeaders(headers map[string]string, prefix string) error {
	if len(headers) > MaxHeaders {
		return fmt.Errorf("has %d headers; use at most %d", len(headers), MaxHeaders)
	}
	if prefix == "" {
		prefix = DefaultHeaderPrefix
	}
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		lower := strings.ToLower(name)
		switch v := headers[name]; {
		case name == "" || len(name) > MaxHeaderNameLen || !httpguts.ValidHeaderFieldName(name):
			return fmt.Errorf("name %q is not an HTTP header name: use 1 to %d letters, digits and !#$%%&'*+-.^_`|~", name, MaxHeaderNameLen)
		case reservedHeaders[lower]:
			return fmt.Errorf("name %q is a header Hookline or HTTP sets; choose another name", name)
		case strings.HasPrefix(lower, strings.ToLower(prefix)):
			return fmt.Errorf("name %q starts with %q, which names Hookline's signature and delivery headers; choose another name, or another header_prefix", name, prefix)
		case seen[lower] != "":
			return fmt.Errorf("names %q and %q are the same header (names ignore case); keep one", seen[lower], name)
		case len(v) > MaxHeaderValueLen || !httpguts.ValidHeaderFieldValue(v):
			return fmt.Errorf("value of %q must be at most %d bytes, without control characters", name, MaxHeaderValueLen)
		}
		seen[lower] = name
	}
	return nil
}
