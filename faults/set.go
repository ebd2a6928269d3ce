package faults

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/events"
)

// ErrUnknownOutcome is what an append fails with under unknown-every: it
// landed, and the caller cannot know it. It also wraps
// context.DeadlineExceeded, as a timed-out acknowledgement would.
var ErrUnknownOutcome = errors.New("faults: append outcome unknown (injected: it landed, its acknowledgement was lost)")

// ErrBadSpec means a --faults specification could not be read.
var ErrBadSpec = errors.New("faults: bad specification")

// Set is the faults a node injects. The zero value injects nothing; see
// the package documentation for each fault. Its wrappers share its
// counters, so one Set is used by one node. A Set is safe for concurrent
// use once built.
type Set struct {
	SlowAppend   time.Duration
	UnknownEvery int
	KillInPlan   int
	KillAfter2xx int
	// PlanShort leaves every PlanShort-th planned delivery out of the
	// plan of a publish, silently (plan-short=N).
	PlanShort int
	// CorruptBody changes one byte of the body of every CorruptBody-th
	// attempt, before it is signed (corrupt-body=N).
	CorruptBody int
	// SkewSequence sends every SkewSequence-th attempt of an ordered
	// delivery with a webhook-sequence one higher than its own
	// (skew-sequence=N).
	SkewSequence   int
	DuplicateDue   bool
	DuplicateWakes bool
	DropWakes      string
	HideType       string
	HideNth        int
	// LagProjections holds each batch of the log back this long before
	// the node's projections apply it: projections that run behind the
	// log, as on a loaded node or behind a busy shared log.
	LagProjections time.Duration
	// Kill ends the process; nil means SIGKILL to itself. Tests give their
	// own.
	Kill func()

	mu        sync.Mutex // guards the counters below
	appends   int
	plans     int
	successes int
	routed    int // planned deliveries seen by ShortPlan
	attempts  int // attempts seen by the corrupting attempter
	sequenced int // ordered attempts seen by the skewing attempter
	hidden    int
	killed    bool
	// counted are the positions of the HideType records counted towards
	// HideNth (a lane that restarts hands records again: they count once),
	// hiddenAt the position of the record hidden, and hideDone whether a
	// batch without it was applied (see hides).
	counted  map[events.Position]bool
	hiddenAt *events.Position
	hideDone bool
}

// Parse reads a --faults specification ("slow-append=20ms,duplicate-due").
// An empty spec is the zero Set.
func Parse(spec string) (*Set, error) {
	s := &Set{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, hasVal := strings.Cut(part, "=")
		num := func() (int, error) {
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("%w: %s needs a count of at least 1, e.g. %s=10", ErrBadSpec, name, name)
			}
			return n, nil
		}
		var err error
		switch name {
		case "slow-append":
			if s.SlowAppend, err = time.ParseDuration(val); err != nil || s.SlowAppend <= 0 {
				return nil, fmt.Errorf("%w: slow-append needs a duration, e.g. slow-append=20ms", ErrBadSpec)
			}
		case "unknown-every":
			s.UnknownEvery, err = num()
		case "kill-in-plan":
			s.KillInPlan, err = num()
		case "kill-after-2xx":
			s.KillAfter2xx, err = num()
		case "plan-short":
			s.PlanShort, err = num()
		case "corrupt-body":
			s.CorruptBody, err = num()
		case "skew-sequence":
			s.SkewSequence, err = num()
		case "duplicate-due":
			s.DuplicateDue = true
		case "duplicate-wakes":
			s.DuplicateWakes = true
		case "drop-wakes":
			if !hasVal || val == "" {
				return nil, fmt.Errorf("%w: drop-wakes needs part of an endpoint id, e.g. drop-wakes=ep_", ErrBadSpec)
			}
			s.DropWakes = val
		case "lag-projections":
			if s.LagProjections, err = time.ParseDuration(val); err != nil || s.LagProjections <= 0 {
				return nil, fmt.Errorf("%w: lag-projections needs a duration, e.g. lag-projections=2s", ErrBadSpec)
			}
		case "hide":
			typ, n, ok := strings.Cut(val, ":")
			if s.HideNth, err = strconv.Atoi(n); !ok || typ == "" || err != nil || s.HideNth < 1 {
				return nil, fmt.Errorf("%w: hide needs TYPE:N, e.g. hide=AttemptSucceeded:1", ErrBadSpec)
			}
			s.HideType = typ
		default:
			return nil, fmt.Errorf("%w: unknown fault %q (slow-append, unknown-every, kill-in-plan, kill-after-2xx, plan-short, corrupt-body, skew-sequence, duplicate-due, duplicate-wakes, drop-wakes, hide, lag-projections)", ErrBadSpec, name)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Active reports whether s injects anything.
func (s *Set) Active() bool {
	return s != nil && (s.SlowAppend > 0 || s.UnknownEvery > 0 || s.KillInPlan > 0 || s.KillAfter2xx > 0 ||
		s.PlanShort > 0 || s.CorruptBody > 0 || s.SkewSequence > 0 || s.DuplicateDue || s.DuplicateWakes || s.DropWakes != "" || s.HideNth > 0 || s.LagProjections > 0)
}

// String is the specification of s, as Parse reads it.
func (s *Set) String() string {
	if s == nil {
		return ""
	}
	var parts []string
	add := func(on bool, f string, args ...any) {
		if on {
			parts = append(parts, fmt.Sprintf(f, args...))
		}
	}
	add(s.SlowAppend > 0, "slow-append=%s", s.SlowAppend)
	add(s.UnknownEvery > 0, "unknown-every=%d", s.UnknownEvery)
	add(s.KillInPlan > 0, "kill-in-plan=%d", s.KillInPlan)
	add(s.KillAfter2xx > 0, "kill-after-2xx=%d", s.KillAfter2xx)
	add(s.PlanShort > 0, "plan-short=%d", s.PlanShort)
	add(s.CorruptBody > 0, "corrupt-body=%d", s.CorruptBody)
	add(s.SkewSequence > 0, "skew-sequence=%d", s.SkewSequence)
	add(s.DuplicateDue, "duplicate-due")
	add(s.DuplicateWakes, "duplicate-wakes")
	add(s.DropWakes != "", "drop-wakes=%s", s.DropWakes)
	add(s.HideNth > 0, "hide=%s:%d", s.HideType, s.HideNth)
	add(s.LagProjections > 0, "lag-projections=%s", s.LagProjections)
	return strings.Join(parts, ",")
}

// kill ends the process, once.
func (s *Set) kill() {
	s.mu.Lock()
	if s.killed {
		s.mu.Unlock()
		return
	}
	s.killed = true
	s.mu.Unlock()
	if s.Kill != nil {
		s.Kill()
		return
	}
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		os.Exit(137)
	}
	select {} // SIGKILL arrives
}

// count bumps one of s's counters and returns its new value.
func (s *Set) count(c *int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	*c++
	return *c
}
