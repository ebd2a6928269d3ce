package eventtype

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// All is the entry that subscribes an endpoint to every event type but the
// operational ones.
const All = "*"

// Reserved starts every operational event type (package operational): a
// producer cannot publish such a type, and [All] does not match one.
const Reserved = "hookline."

// MaxLen bounds an event type and an entry, in bytes.
const MaxLen = 128

// wildcard ends a prefix pattern.
const wildcard = ".*"

// Check reports what is wrong with a concrete event type, the type of a
// published event or of a catalog entry: a pattern is refused with a word
// on where patterns belong. The error names the value, not the field: the
// caller adds the field.
func Check(typ string) error {
	if len(typ) <= MaxLen && strings.Contains(typ, "*") {
		return fmt.Errorf("%q is a pattern; name one event type, such as invoice.paid (patterns such as order.* are for an endpoint's event types)", typ)
	}
	return checkName(typ)
}

// CheckEntry reports what is wrong with one entry of an endpoint's event
// types: an event type, a prefix pattern (an event type and ".*"), or
// [All].
func CheckEntry(entry string) error {
	if entry == All {
		return nil
	}
	prefix, pattern := strings.CutSuffix(entry, wildcard)
	if i := strings.IndexByte(prefix, '*'); i >= 0 {
		return fmt.Errorf("%q has '*' at offset %d; a pattern is an event type and a trailing .* (order.*), or * alone", entry, i)
	}
	if len(entry) > MaxLen {
		return fmt.Errorf("is %d characters long; use at most %d", len(entry), MaxLen)
	}
	if pattern && prefix == "" {
		return fmt.Errorf("%q has no prefix; give one (order.*), or * for every type", entry)
	}
	return checkName(prefix)
}

// checkName checks a dotted name: segments of [A-Za-z0-9_-] between
// single dots, at most MaxLen characters.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty; give a dotted name such as invoice.paid")
	case len(name) > MaxLen:
		return fmt.Errorf("is %d characters long; use at most %d", len(name), MaxLen)
	}
	for seg := range strings.SplitSeq(name, ".") {
		if seg == "" {
			return fmt.Errorf("%q has an empty segment; use a dotted name such as invoice.paid", name)
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !isNameByte(c) {
				return fmt.Errorf("%q has %q; use letters, digits, '_' and '-' between dots", name, c)
			}
		}
	}
	return nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// IsPattern reports whether an entry matches more than one type: [All], or
// a prefix pattern.
func IsPattern(entry string) bool { return entry == All || strings.HasSuffix(entry, wildcard) }

// Patterns returns every entry that matches typ, the most specific first:
// typ itself, then the prefix pattern of each of its prefixes, longest
// first, then [All] unless typ is [Reserved]. For order.item.added:
// order.item.added, order.item.*, order.*, *. It is the rule itself: the
// registry reads its index under each, and [Match] looks for each.
func Patterns(typ string) []string {
	if typ == All {
		return []string{All}
	}
	out := make([]string, 0, 4)
	out = append(out, typ)
	for i := len(typ) - 1; i > 0; i-- {
		if typ[i] == '.' {
			out = append(out, typ[:i]+wildcard)
		}
	}
	if !strings.HasPrefix(typ, Reserved) {
		out = append(out, All)
	}
	return out
}

// Entries returns an endpoint's event types as the rule reads them: sorted
// and without repeats; [All] alone when they include it or are empty.
func Entries(types []string) []string {
	if len(types) == 0 || slices.Contains(types, All) {
		return []string{All}
	}
	out := slices.Clone(types)
	slices.Sort(out)
	return slices.Compact(out)
}

// Match returns the entry of an endpoint's event types that matches typ,
// the most specific one (see [Patterns]); ok is false when none does.
// Empty types match as [All].
func Match(types []string, typ string) (entry string, ok bool) {
	if len(types) == 0 {
		types = []string{All}
	}
	for _, p := range Patterns(typ) {
		if slices.Contains(types, p) {
			return p, true
		}
	}
	return "", false
}
