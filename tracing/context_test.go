package tracing_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hookline/hookline/tracing"
)

func TestParse(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name, in, want string // want "" means invalid
	}{
		{name: "version 00", in: tp, want: tp},
		{name: "not sampled", in: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", want: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{name: "unknown flags cleared", in: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", want: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"},
		{name: "a later version, longer", in: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", want: tp},
		{name: "a later version, same length", in: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", want: tp},
		{name: "version ff", in: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{name: "version 00 longer", in: tp + "-01"},
		{name: "later version glued", in: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"},
		{name: "upper case", in: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"},
		{name: "zero trace id", in: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		{name: "zero parent id", in: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"},
		{name: "short", in: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"},
		{name: "wrong separators", in: "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01"},
		{name: "not hex", in: "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01"},
		{name: "empty", in: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tracing.Parse(tc.in)
			if tc.want == "" {
				if !errors.Is(err, tracing.ErrInvalid) {
					t.Fatalf("Parse(%q) = %v, %v; want ErrInvalid", tc.in, c, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got := c.String(); got != tc.want {
				t.Fatalf("Parse(%q).String() = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCheckState(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{name: "empty", in: "", ok: true},
		{name: "two members", in: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", ok: true},
		{name: "spaces and empty members", in: " rojo=1 ,, congo=2\t", ok: true},
		{name: "no value", in: "rojo=", ok: false},
		{name: "no equals", in: "rojo", ok: false},
		{name: "control byte", in: "rojo=1\n", ok: false},
		{name: "too long", in: "k=" + strings.Repeat("v", tracing.MaxState), ok: false},
		{name: "too many members", in: strings.Repeat("k=v,", 33), ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tracing.CheckState(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("CheckState(%q) = %v; want ok %v", tc.in, err, tc.ok)
			}
			if err != nil && !errors.Is(err, tracing.ErrInvalid) {
				t.Fatalf("CheckState(%q) = %v; want it to wrap ErrInvalid", tc.in, err)
			}
		})
	}
}

func TestForAttempt(t *testing.T) {
	const producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	t.Run("a child of the producer's span", func(t *testing.T) {
		a, parent, ok := tracing.ForAttempt(producer, "acme", "inv_1", false)
		b, _, _ := tracing.ForAttempt(producer, "acme", "inv_1", false)
		if !ok || parent.String() != "00f067aa0ba902b7" {
			t.Fatalf("parent %v (%v); want the producer's span 00f067aa0ba902b7", parent, ok)
		}
		if a.TraceID.String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !a.Sampled() {
			t.Fatalf("context %v; want the producer's trace id and its sampled flag", a)
		}
		if a.SpanID == b.SpanID || a.SpanID == parent || !a.SpanID.IsValid() {
			t.Fatalf("span ids %v and %v (parent %v); want a new one per attempt", a.SpanID, b.SpanID, parent)
		}
		if _, err := tracing.Parse(a.String()); err != nil {
			t.Fatalf("the attempt's traceparent %q does not parse: %v", a.String(), err)
		}
	})
	t.Run("the event's own trace", func(t *testing.T) {
		a, _, ok := tracing.ForAttempt("", "acme", "inv_1", true)
		b, _, _ := tracing.ForAttempt("", "acme", "inv_1", false)
		c, _, _ := tracing.ForAttempt("", "acme", "inv_2", true)
		other, _, _ := tracing.ForAttempt("", "globex", "inv_1", true)
		if ok {
			t.Fatal("an event without a traceparent has no parent span")
		}
		if a.TraceID != tracing.EventTraceID("acme", "inv_1") || a.TraceID != b.TraceID {
			t.Fatalf("trace ids %v, %v; want the event's own, the same for every attempt", a.TraceID, b.TraceID)
		}
		if c.TraceID == a.TraceID || other.TraceID == a.TraceID {
			t.Fatal("two events share a trace id")
		}
		if !a.Sampled() || b.Sampled() {
			t.Fatalf("flags %x and %x; want sampled only when the node exports spans", a.Flags, b.Flags)
		}
	})
}

func ExampleParse() {
	c, err := tracing.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		panic(err)
	}
	fmt.Println(c.TraceID, c.SpanID, c.Sampled())
	// Output: 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7 true
}

// FuzzParse: Parse never panics, and what it accepts comes back as a
// version-00 traceparent that parses to the same context.
func FuzzParse(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := tracing.Parse(s)
		if err != nil {
			return
		}
		again, err := tracing.Parse(c.String())
		if err != nil || again != c || len(c.String()) != 55 || !c.IsValid() {
			t.Fatalf("Parse(%q) = %v, its String %q parses to %v, %v", s, c, c.String(), again, err)
		}
	})
}
