package projections_test

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/projections"
)

func TestStringKeysKeepOrder(t *testing.T) {
	strs := []string{"", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\x00", "\xff", "a\xff"}
	type pair struct {
		s string
		k []byte
	}
	var pairs []pair
	for _, s := range strs {
		// A trailing part proves the string never runs into what follows.
		k := projections.AppendUint64(projections.AppendString(nil, s), 7)
		pairs = append(pairs, pair{s, k})
		got, rest, err := projections.ReadString(k)
		if err != nil || got != s {
			t.Fatalf("ReadString(%q) = %q, %v; want %q", k, got, err, s)
		}
		if v, _, err := projections.ReadUint64(rest); err != nil || v != 7 {
			t.Fatalf("rest of %q = %d, %v", s, v, err)
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].s < pairs[j].s })
	for i := 1; i < len(pairs); i++ {
		if bytes.Compare(pairs[i-1].k, pairs[i].k) >= 0 {
			t.Errorf("key(%q) >= key(%q)", pairs[i-1].s, pairs[i].s)
		}
	}
}

func TestBadKeys(t *testing.T) {
	for name, b := range map[string][]byte{
		"unterminated": []byte("abc"),
		"bad escape":   {'a', 0, 2},
		"trailing nul": {'a', 0},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := projections.ReadString(b); !errors.Is(err, projections.ErrBadKey) {
				t.Errorf("ReadString = %v, want ErrBadKey", err)
			}
		})
	}
	if _, _, err := projections.ReadUint64([]byte{1, 2}); !errors.Is(err, projections.ErrBadKey) {
		t.Errorf("ReadUint64 short = %v, want ErrBadKey", err)
	}
}

func TestTimeKeys(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	times := []time.Time{{}, time.Unix(0, -5).UTC(), time.Unix(0, 0).UTC(), base, base.Add(time.Nanosecond), base.Add(24 * time.Hour)}
	for i, tm := range times {
		k := projections.AppendTime(nil, tm)
		got, _, err := projections.ReadTime(k)
		if err != nil || !got.Equal(tm) {
			t.Errorf("ReadTime(AppendTime(%v)) = %v, %v", tm, got, err)
		}
		d := projections.AppendTimeDesc(nil, tm)
		got, _, err = projections.ReadTimeDesc(d)
		if err != nil || !got.Equal(tm) {
			t.Errorf("ReadTimeDesc(AppendTimeDesc(%v)) = %v, %v", tm, got, err)
		}
		if i == 0 {
			continue
		}
		prev := times[i-1]
		if bytes.Compare(projections.AppendTime(nil, prev), k) >= 0 {
			t.Errorf("AppendTime: %v does not sort before %v", prev, tm)
		}
		if bytes.Compare(projections.AppendTimeDesc(nil, prev), d) <= 0 {
			t.Errorf("AppendTimeDesc: %v does not sort after %v", prev, tm)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte("ab"), []byte("ac")},
		{[]byte{'a', 0xff}, []byte("b")},
		{[]byte{0xff, 0xff}, nil},
	} {
		if got := projections.PrefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzStringKeys: any two strings read back as written, with what follows
// them, and their keys sort as the strings do.
func FuzzStringKeys(f *testing.F) {
	f.Add("a", "a\x00")
	f.Add("\x00\x00", "\x00\x01")
	f.Add("", "\xff")
	f.Fuzz(func(t *testing.T, a, b string) {
		ka := projections.AppendString(projections.AppendString([]byte("p"), a), b)
		gotA, rest, err := projections.ReadString(ka[1:])
		if err != nil || gotA != a {
			t.Fatalf("ReadString = %q, %v; want %q", gotA, err, a)
		}
		gotB, rest, err := projections.ReadString(rest)
		if err != nil || gotB != b || len(rest) != 0 {
			t.Fatalf("second part = %q, %v, rest %q; want %q", gotB, err, rest, b)
		}
		if c := bytes.Compare(projections.AppendString(nil, a), projections.AppendString(nil, b)); c != strings.Compare(a, b) {
			t.Fatalf("keys of %q and %q compare %d, the strings %d", a, b, c, strings.Compare(a, b))
		}
	})
}

// BenchmarkStringKey: a delivery id appended to a key and read back.
func BenchmarkStringKey(b *testing.B) {
	id := "dlv_4f1c2e9a8b7d6c5e4f3a2b1c0d9e8f7a-ep_0123456789abcdef"
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = projections.AppendString(buf[:0], id)
		if _, _, err := projections.ReadString(buf); err != nil {
			b.Fatal(err)
		}
	}
}
