package tenant

import (
	"math"
	"slices"
	"time"
)

// Leases shares a tenant's quota among the endpoint grains that ask for it.
// Each grant is a short lease: how many attempts the endpoint may start, and
// how many it may have in flight, until the lease expires. Capacity is split
// max-min fairly among the endpoints that asked within the last Window: an
// endpoint that wants less than an equal share keeps what it wants and the
// rest goes to the others. A grant never makes the unexpired grants of all
// endpoints exceed the budget; when a newcomer arrives, the others' shares
// shrink as their leases are renewed, within one lease period.
//
// Leases is memory only and not safe for concurrent use; the tenant grain
// owns it. Its zero value is not usable: build it with [NewLeases].
type Leases struct {
	duration time.Duration
	window   time.Duration
	byID     map[string]*lease
}

type lease struct {
	asked                      time.Time
	wantAttempts, wantInFlight int32
	attempts, inFlight         int32
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
// rounded down) and maxInFlight. Negative wants count as zero.
func (l *Leases) Grant(now time.Time, endpointID string, wantAttempts, wantInFlight int32, attemptsPerSecond float64, maxInFlight int32) Grant {
	for id, e := range l.byID {
		if now.Sub(e.asked) > l.window && !e.expires.After(now) {
			delete(l.byID, id)
		}
	}
	e := l.byID[endpointID]
	if e == nil {
		e = &lease{}
		l.byID[endpointID] = e
	}
	e.asked, e.wantAttempts, e.wantInFlight = now, max(wantAttempts, 0), max(wantInFlight, 0)

	attemptBudget := int32(min(math.Floor(attemptsPerSecond*l.duration.Seconds()), math.MaxInt32))
	var ids []string
	var wantA, wantF []int32
	var heldA, heldF int32
	for id, o := range l.byID {
		if now.Sub(o.asked) <= l.window {
			ids = append(ids, id)
		}
		if id != endpointID && o.expires.After(now) {
			heldA += o.attempts
			heldF += o.inFlight
		}
	}
	slices.Sort(ids) // deterministic: the remainder of a split goes to the first ids
	for _, id := range ids {
		wantA = append(wantA, l.byID[id].wantAttempts)
		wantF = append(wantF, l.byID[id].wantInFlight)
	}
	i := slices.Index(ids, endpointID)
	e.attempts = min(fairShares(wantA, attemptBudget)[i], max(attemptBudget-heldA, 0))
	e.inFlight = min(fairShares(wantF, maxInFlight)[i], max(maxInFlight-heldF, 0))
	e.expires = now.Add(l.duration)
	return Grant{Attempts: e.attempts, InFlight: e.inFlight, Expires: e.expires}
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
