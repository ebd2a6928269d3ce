package tracing

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// ErrInvalid says a traceparent or tracestate does not follow W3C Trace
// Context; the error that wraps it says where.
var ErrInvalid = errors.New("tracing: invalid trace context")

// TraceID names a trace; the zero value is invalid.
type TraceID [16]byte

// SpanID names a span; the zero value is invalid.
type SpanID [8]byte

// String returns the id in lower-case hex, as traceparent writes it.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// IsValid reports whether t is not all zeros.
func (t TraceID) IsValid() bool { return t != TraceID{} }

// String returns the id in lower-case hex, as traceparent writes it.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// IsValid reports whether s is not all zeros.
func (s SpanID) IsValid() bool { return s != SpanID{} }

// FlagSampled is the traceparent flag that says the caller may have
// recorded the trace.
const FlagSampled byte = 0x01

// knownFlags are the flags a version-00 traceparent may carry (sampled,
// and random of Trace Context Level 2); others are cleared.
const knownFlags byte = 0x03

// Context is one span's trace context: what a traceparent header carries.
// The zero value is invalid (see IsValid).
type Context struct {
	TraceID TraceID
	SpanID  SpanID
	Flags   byte
}

// IsValid reports whether both ids are set.
func (c Context) IsValid() bool { return c.TraceID.IsValid() && c.SpanID.IsValid() }

// Sampled reports whether the sampled flag is set.
func (c Context) Sampled() bool { return c.Flags&FlagSampled != 0 }

// String returns c as a version-00 traceparent header:
// 00-<trace id>-<span id>-<flags>.
func (c Context) String() string {
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], c.TraceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], c.SpanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{c.Flags & knownFlags})
	return string(b[:])
}

// Parse reads a traceparent header. It accepts version 00 exactly as the
// specification writes it (55 characters, lower-case hex, neither id all
// zeros) and, as the specification asks, a later version whose first 55
// characters read as version 00 does, followed by nothing or by "-" and
// more; version ff is invalid. The Context it returns is the same
// traceparent in version 00 ([Context.String]), with unknown flags
// cleared. An error wraps [ErrInvalid].
func Parse(traceparent string) (Context, error) {
	s := traceparent
	if len(s) < 55 {
		return Context{}, fmt.Errorf("%w: traceparent is %d characters; want 00-<32 hex>-<16 hex>-<2 hex>", ErrInvalid, len(s))
	}
	var version [1]byte
	if !lowerHex(s[0:2]) || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return Context{}, fmt.Errorf("%w: traceparent %q is not 00-<32 hex>-<16 hex>-<2 hex> (lower-case hex)", ErrInvalid, clip(s))
	}
	_, _ = hex.Decode(version[:], []byte(s[0:2]))
	switch {
	case version[0] == 0xff:
		return Context{}, fmt.Errorf("%w: traceparent version ff is invalid", ErrInvalid)
	case version[0] == 0 && len(s) != 55:
		return Context{}, fmt.Errorf("%w: a version-00 traceparent is 55 characters, not %d", ErrInvalid, len(s))
	case len(s) > 55 && s[55] != '-':
		return Context{}, fmt.Errorf("%w: traceparent %q has extra characters", ErrInvalid, clip(s))
	}
	var c Context
	var flags [1]byte
	if !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) {
		return Context{}, fmt.Errorf("%w: traceparent %q is not lower-case hex", ErrInvalid, clip(s))
	}
	_, _ = hex.Decode(c.TraceID[:], []byte(s[3:35]))
	_, _ = hex.Decode(c.SpanID[:], []byte(s[36:52]))
	_, _ = hex.Decode(flags[:], []byte(s[53:55]))
	c.Flags = flags[0] & knownFlags
	switch {
	case !c.TraceID.IsValid():
		return Context{}, fmt.Errorf("%w: traceparent's trace id is all zeros", ErrInvalid)
	case !c.SpanID.IsValid():
		return Context{}, fmt.Errorf("%w: traceparent's parent id is all zeros", ErrInvalid)
	}
	return c, nil
}

// MaxState is the longest tracestate kept (the length the specification
// asks every vendor to pass on).
const MaxState = 512

// CheckState checks a tracestate header loosely: at most [MaxState]
// bytes of printable ASCII, at most 32 comma-separated members, each
// key=value. Hookline passes it on unchanged and never reads it. An error
// wraps [ErrInvalid].
func CheckState(tracestate string) error {
	if len(tracestate) > MaxState {
		return fmt.Errorf("%w: tracestate is %d bytes, over %d", ErrInvalid, len(tracestate), MaxState)
	}
	members, start := 0, 0
	for i := 0; i <= len(tracestate); i++ {
		if i < len(tracestate) {
			if c := tracestate[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
				return fmt.Errorf("%w: tracestate has a byte 0x%02x that is not printable ASCII", ErrInvalid, c)
			}
			if tracestate[i] != ',' {
				continue
			}
		}
		m := strings.Trim(tracestate[start:i], " \t")
		start = i + 1
		if m == "" {
			continue // empty members are allowed and ignored
		}
		members++
		k, v, ok := strings.Cut(m, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("%w: tracestate member %q is not key=value", ErrInvalid, clip(m))
		}
	}
	if members > 32 {
		return fmt.Errorf("%w: tracestate has %d members, over 32", ErrInvalid, members)
	}
	return nil
}

// EventTraceID is the trace id of an event published without a
// traceparent: derived from the tenant and event ids (the first 16 bytes
// of a SHA-256), so every attempt of every delivery of the event shares
// it, and it is found again from the ids alone.
func EventTraceID(tenantID, eventID string) TraceID {
	h := sha256.New()
	h.Write([]byte("hookline/trace\x00"))
	h.Write([]byte(tenantID))
	h.Write([]byte{0})
	h.Write([]byte(eventID))
	var t TraceID
	copy(t[:], h.Sum(nil))
	if !t.IsValid() {
		t[15] = 1
	}
	return t
}

// NewTraceID returns a random trace id, never all zeros.
func NewTraceID() TraceID {
	for {
		var t TraceID
		a, b := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			t[i], t[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
		if t.IsValid() {
			return t
		}
	}
}

// NewSpanID returns a random span id, never all zeros.
func NewSpanID() SpanID {
	for {
		var s SpanID
		n := rand.Uint64()
		for i := range s {
			s[i] = byte(n >> (8 * i))
		}
		if s.IsValid() {
			return s
		}
	}
}

// ForAttempt returns the trace context of a new attempt of a delivery of
// an event: a new span id, in the trace of producer (the event's recorded
// traceparent) when it parses, whose span is then the parent (hasParent);
// otherwise in the event's own trace ([EventTraceID]), sampled when
// sampled is set (the node exports its spans).
func ForAttempt(producer, tenantID, eventID string, sampled bool) (c Context, parent SpanID, hasParent bool) {
	if producer != "" {
		if p, err := Parse(producer); err == nil {
			return Context{TraceID: p.TraceID, SpanID: NewSpanID(), Flags: p.Flags}, p.SpanID, true
		}
	}
	c = Context{TraceID: EventTraceID(tenantID, eventID), SpanID: NewSpanID()}
	if sampled {
		c.Flags = FlagSampled
	}
	return c, SpanID{}, false
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
