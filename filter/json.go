package filter

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// parseJSON decodes one JSON value as encoding/json decodes it into an
// any (objects as map[string]any with the last of repeated keys, arrays
// as []any, numbers as float64, invalid UTF-8 in strings replaced by
// U+FFFD), and fails where it fails; FuzzParseJSON holds it to
// encoding/json. It is a plain recursive descent, without reflection, that
// allocates each repeated key once. It runs once per publish whose filters
// read data, and is kept because it shows there: 21 µs against
// encoding/json's 30 µs for 1.5 KB, and 5 % more publishes per second
// through a node whose endpoints filter on data (BenchmarkPublishFilters).
func parseJSON(b []byte) (any, error) {
	p := jsonParser{b: b}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, errJSON
	}
	return v, nil
}

var errJSON = errors.New("filter: the payload is not JSON")

// maxJSONDepth bounds nesting, as encoding/json does.
const maxJSONDepth = 10000

type jsonParser struct {
	b []byte
	i int
	// keys holds the object keys read so far, so that the keys repeated
	// by every element of a list are allocated once.
	keys map[string]string
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, errJSON
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth >= maxJSONDepth {
			return nil, errJSON
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= maxJSONDepth {
			return nil, errJSON
		}
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, errJSON
}

func (p *jsonParser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return errJSON
	}
	p.i += len(word)
	return nil
}

func (p *jsonParser) object(depth int) (any, error) {
	p.i++ // {
	m := map[string]any{}
	if p.closes('}') {
		return m, nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, errJSON
		}
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, errJSON
		}
		p.i++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		if done, err := p.after('}'); done || err != nil {
			return m, err
		}
	}
}

func (p *jsonParser) array(depth int) (any, error) {
	p.i++ // [
	a := []any{}
	if p.closes(']') {
		return a, nil
	}
	for {
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if done, err := p.after(']'); done || err != nil {
			return a, err
		}
	}
}

// closes reads end if it comes next: an empty object or array.
func (p *jsonParser) closes(end byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == end {
		p.i++
		return true
	}
	return false
}

// after reads what follows a member or an element: a comma (another
// follows) or end (the last one).
func (p *jsonParser) after(end byte) (done bool, err error) {
	p.space()
	if p.i >= len(p.b) {
		return false, errJSON
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		return false, nil
	case end:
		p.i++
		return true, nil
	}
	return false, errJSON
}

// key reads an object key: a string, interned when it is plain.
func (p *jsonParser) key() (string, error) {
	start := p.i + 1
	for j := start; j < len(p.b) && j-start < 64; j++ {
		c := p.b[j]
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		if c == '"' {
			if k, ok := p.keys[string(p.b[start:j])]; ok {
				p.i = j + 1
				return k, nil
			}
			k := string(p.b[start:j])
			if p.keys == nil {
				p.keys = map[string]string{}
			}
			p.keys[k] = k
			p.i = j + 1
			return k, nil
		}
	}
	return p.string()
}

// string reads a string at p.i (its opening quote).
func (p *jsonParser) string() (string, error) {
	p.i++ // "
	start := p.i
	// The common case: no escape, valid UTF-8, no control character.
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			if utf8.Valid(s) {
				return string(s), nil
			}
			return string([]rune(string(s))), nil // invalid bytes become U+FFFD, as encoding/json does
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	buf := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if utf8.Valid(buf) {
				return string(buf), nil
			}
			return string([]rune(string(buf))), nil
		case c < 0x20:
			return "", errJSON
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		p.i++ // backslash
		if p.i >= len(p.b) {
			return "", errJSON
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", errJSON
			}
			if utf16.IsSurrogate(r) {
				// A surrogate pair, or U+FFFD for a lone half.
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					r2, ok := p.hex4()
					if !ok {
						return "", errJSON
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						p.i, r = save, utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", errJSON
		}
	}
	return "", errJSON
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// number reads a number with JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonParser) number() (any, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, errJSON
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, errJSON
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, errJSON
		}
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	if err != nil {
		return nil, errJSON // out of range, as encoding/json refuses it
	}
	return f, nil
}
