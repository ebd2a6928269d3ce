package tenant

import (
	"math"
	"slices"
	"time"
)

// Leases shares a tenant's quota among the endpoint grains that ask for it.
// Each grant is a short lease: how many attempts the endpoint may start, and
// how many it may have in flight, until the lease expires. An endpoint
// that asks again before then gets only what is left of its share for that
// period, so the quota's attempts per second hold however often it asks. Capacity is split
// max-min fairly among the endpoints that asked within the last Window: an
// endpoint that wants less than an equal share keeps what it wants and the
// rest goes to the others. A grant never makes the unexpired grants of all
// endpoints exceed the budget; when a newcomer arrives, the others' shares
// shrink as their leases are renewed, within one lease period.
//
// An endpoint that asks again in the last quarter of its period gets the
// next period's lease at once (renewed ahead): it holds it until its
// current one ends and then goes on without waiting for an answer, so a
// busy endpoint never stops at a period's end for a round trip to its
// tenant, nor for longer while the tenant's grain moves to another member.
//
// Leases is memory only and not safe for concurrent use; the tenant grain
// owns it. Its zero value is not usable: build it with [NewLeases].
type Leases struct {
	duration time.Duration
	window   time.Duration
	byID     map[string]*lease

	// The fair split is computed for all askers at once and kept until the
	// set of askers or the budget changes, or a want changes and the split
	// is older than a quarter of a lease: a tenant with hundreds of
	// endpoints asking every second must not re-sort them on every ask.
	shares    map[string][2]int32 // endpoint → attempts, in-flight share
	sharesAt  time.Time
	sharesFor [2]int32 // the budget the shares split
}

type lease struct {
	asked                      time.Time
	wantAttempts, wantInFlight int32
	attempts, inFlight         int32 // granted for the period ending at expires
	expires                    time.Time
}

// Grant is one lease handed out.
type Grant struct {
	Attempts int32
	InFlight int32
	Expires  time.Time
}

// NewLeases returns leases lasting duration, shared among the endpoints
// that asked within window.
func NewLeases(duration, window time.Duration) *Leases {
	return &Leases{duration: duration, window: window, byID: map[string]*lease{}}
}

// Grant hands endpointID a lease at now, given what it wants and the
// tenant's budget: attemptsPerSecond (turned into attempts per lease,
// rounded down) and maxInFlight. Negative wants count as zero. Asked in
// the last quarter of the endpoint's period, the grant is for the next
// period: it expires a period after the current one ends.
func (l *Leases) Grant(now time.Time, endpointID string, wantAttempts, wantInFlight int32, attemptsPerSecond float64, maxInFlight int32) Grant {
	stale := false
	for id, e := range l.byID {
		if now.Sub(e.asked) > l.window && !e.expires.After(now) {
			delete(l.byID, id)
			stale = true
		}
	}
	e := l.byID[endpointID]
	if e == nil {
		e = &lease{}
		l.byID[endpointID] = e
		stale = true
	}
	wantAttempts, wantInFlight = max(wantAttempts, 0), max(wantInFlight, 0)
	// at is the start of the period the grant is for: now, or the end of
	// the endpoint's current period when it renews ahead.
	at := now
	renewal := e.expires.After(now)
	if renewal && e.expires.Sub(now) <= l.duration/4 {
		at, renewal = e.expires, false
	}
	if renewal {
		// The period's demand: what the endpoint took in it and what it
		// wants now.
		wantAttempts += e.attempts
	}
	if (e.wantAttempts != wantAttempts || e.wantInFlight != wantInFlight) && now.Sub(l.sharesAt) >= l.duration/4 {
		stale = true
	}
	if share, ok := l.shares[endpointID]; renewal && ok && share[0] < wantAttempts {
		stale = true // it may be owed more than the split of a smaller want gave it
	}
	e.asked, e.wantAttempts, e.wantInFlight = now, wantAttempts, wantInFlight

	attemptBudget := int32(min(math.Floor(attemptsPerSecond*l.duration.Seconds()), math.MaxInt32))
	if budget := [2]int32{attemptBudget, maxInFlight}; budget != l.sharesFor {
		l.sharesFor, stale = budget, true
	}
	if _, ok := l.shares[endpointID]; stale || !ok {
		l.split(now, attemptBudget, maxInFlight)
	}
	var heldA, heldF int32
	for id, o := range l.byID {
		if id != endpointID && o.expires.After(at) {
			heldA += o.attempts
			heldF += o.inFlight
		}
	}
	share := l.shares[endpointID]
	attempts := min(share[0], max(attemptBudget-heldA, 0))
	inFlight := min(share[1], max(maxInFlight-heldF, 0))
	if renewal {
		// Asked again within its lease's period: the endpoint used the
		// attempts it was granted. It gets what is left of its share of
		// the period's budget, the same expiry, and nothing more until the
		// period ends: the budget is per period, however often it asks.
		attempts = max(attempts-e.attempts, 0)
		e.attempts += attempts
	} else {
		e.attempts = attempts
		e.expires = at.Add(l.duration)
	}
	if attempts == 0 {
		inFlight = 0 // nothing to start: the endpoint waits for the period's end
	}
	e.inFlight = inFlight
	return Grant{Attempts: attempts, InFlight: inFlight, Expires: e.expires}
}

// split computes the fair shares of every endpoint that asked within the
// window.
func (l *Leases) split(now time.Time, attemptBudget, maxInFlight int32) {
	var ids []string
	for id, o := range l.byID {
		if now.Sub(o.asked) <= l.window {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // deterministic: the remainder of a split goes to the first ids
	wantA := make([]int32, len(ids))
	wantF := make([]int32, len(ids))
	for i, id := range ids {
		wantA[i], wantF[i] = l.byID[id].wantAttempts, l.byID[id].wantInFlight
	}
	sa, sf := fairShares(wantA, attemptBudget), fairShares(wantF, maxInFlight)
	l.shares = make(map[string][2]int32, len(ids))
	for i, id := range ids {
		l.shares[id] = [2]int32{sa[i], sf[i]}
	}
	l.sharesAt = now
}

// fairShares splits capacity max-min fairly among wants: whoever wants less
// than an equal share gets what it wants, the rest is split equally among
// the others; the indivisible remainder goes to the first of them.
func fairShares(wants []int32, capacity int32) []int32 {
	shares := make([]int32, len(wants))
	order := make([]int, len(wants))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(wants[a]) - int(wants[b]) })
	left := int64(max(capacity, 0))
	for k, i := range order {
		n := int64(len(order) - k)
		share := left / n
		if left%n != 0 && int64(wants[i]) > share {
			share++ // hand out the remainder
		}
		shares[i] = int32(min(int64(wants[i]), share))
		left -= int64(shares[i])
	}
	return shares
}
