package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrBadKey means a stored key did not decode: the store holds something
// this code did not write, or a caller passed a forged key (a cursor).
var ErrBadKey = errors.New("projections: malformed key")

// Keys are built by appending order-preserving parts: comparing two keys
// byte-wise compares their parts in order. Strings are escaped and
// terminated (0x00 becomes 0x00 0xff, the end is 0x00 0x01), so any string,
// including one holding 0x00 or one that is a prefix of another, keeps its
// order and never runs into the next part. Numbers and times are fixed-width
// big-endian.

// AppendString appends s as an escaped, terminated key part.
func AppendString(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s)+2)
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			break
		}
		dst = append(append(dst, s[:i]...), 0, 0xff)
		s = s[i+1:]
	}
	return append(append(dst, s...), 0, 1)
}

// ReadString decodes a part written by [AppendString] and returns the rest.
func ReadString(b []byte) (s string, rest []byte, err error) {
	var buf []byte // only for a string that holds 0x00
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 || i+1 >= len(b) {
			return "", nil, fmt.Errorf("%w: unterminated string part", ErrBadKey)
		}
		switch b[i+1] {
		case 1:
			if buf == nil {
				return string(b[:i]), b[i+2:], nil
			}
			return string(append(buf, b[:i]...)), b[i+2:], nil
		case 0xff:
			buf = append(append(buf, b[:i]...), 0)
			b = b[i+2:]
		default:
			return "", nil, fmt.Errorf("%w: bad escape in string part", ErrBadKey)
		}
	}
}

// AppendUint64 appends v big-endian.
func AppendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// ReadUint64 decodes a part written by [AppendUint64].
func ReadUint64(b []byte) (v uint64, rest []byte, err error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("%w: short integer part", ErrBadKey)
	}
	return binary.BigEndian.Uint64(b), b[8:], nil
}

// AppendTime appends t so that earlier times sort first. The zero time sorts
// before every other time.
func AppendTime(dst []byte, t time.Time) []byte { return AppendUint64(dst, timeBits(t)) }

// AppendTimeDesc appends t so that later times sort first: a forward scan
// reads newest first.
func AppendTimeDesc(dst []byte, t time.Time) []byte { return AppendUint64(dst, ^timeBits(t)) }

// ReadTime decodes a part written by [AppendTime].
func ReadTime(b []byte) (t time.Time, rest []byte, err error) {
	v, rest, err := ReadUint64(b)
	if err != nil {
		return time.Time{}, nil, err
	}
	return bitsTime(v), rest, nil
}

// ReadTimeDesc decodes a part written by [AppendTimeDesc].
func ReadTimeDesc(b []byte) (t time.Time, rest []byte, err error) {
	v, rest, err := ReadUint64(b)
	if err != nil {
		return time.Time{}, nil, err
	}
	return bitsTime(^v), rest, nil
}

// timeBits maps t to an unsigned number in time order: Unix nanoseconds with
// the sign bit flipped, 0 for the zero time.
func timeBits(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano()) ^ (1 << 63)
}

func bitsTime(v uint64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(v^(1<<63))).UTC()
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, for an iterator's upper bound; nil (no bound) when prefix is all
// 0xff bytes.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
