package main

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hookline/hookline/verify"
)

// What a chaos run saw, kept apart from the node: every message an
// endpoint's consumer got (the receiver's requests, the pull consumers'
// messages), every action as it ran, and what the actions decided that
// the checks need (which host a secret header was given for, when a
// tenant was erased, which deliveries were sent again on purpose, what
// the reads after an erasure answered).

// chaosSecretHeader is the secret header the run gives endpoints.
const chaosSecretHeader = "X-Chaos-Key"

// pullHost is the host of a message a pull consumer took.
const pullHost = "pull"

// chaosSeen is one message an endpoint's consumer got: a request the
// receiver read, or a message a pull consumer leased.
type chaosSeen struct {
	Endpoint string // the bench's name of the endpoint
	Host     string // the host it was sent to, or pullHost
	// Delivery, Event, Key and Seq are its webhook-id, webhook-event-id,
	// webhook-ordering-key and webhook-sequence (0 none).
	Delivery, Event, Key string
	Seq                  int64
	Secret               string // its chaosSecretHeader ("" none)
	Body                 uint64
	// Signed is its webhook-timestamp: when it was signed, to the second.
	Signed time.Time
	// Status is the receiver's answer (401: the signature did not
	// verify), or for a pulled message 200 once acknowledged, 0 if not.
	Status int
	// Arrived is when it was read or pulled, Answered when it was
	// answered or acknowledged (zero: never acknowledged).
	Arrived, Answered time.Time
}

// verified reports whether the message's signature held.
func (s chaosSeen) verified() bool { return s.Status != http.StatusUnauthorized }

// ok reports whether the message was answered 2xx (acknowledged).
func (s chaosSeen) ok() bool { return s.Status/100 == 2 }

// permanent reports whether the answer ends the delivery failed: a 4xx
// other than 408 and 429 (a 401 is a refused signature: the node's fault,
// retried).
func (s chaosSeen) permanent() bool {
	return s.Status/100 == 4 && s.Status != http.StatusRequestTimeout && s.Status != http.StatusTooManyRequests && s.Status != http.StatusUnauthorized
}

// ends reports whether the answer ends the delivery: 2xx or permanent.
func (s chaosSeen) ends() bool { return s.ok() || s.permanent() }

// seenFrom is a request the receiver read, as the run keeps it.
func seenFrom(w Watched) chaosSeen {
	seq, _ := strconv.ParseInt(w.Header.Get("webhook-sequence"), 10, 64)
	signed, _ := strconv.ParseInt(w.Header.Get(verify.HeaderTimestamp), 10, 64)
	return chaosSeen{Endpoint: w.Endpoint, Host: w.Host, Delivery: w.Header.Get(verify.HeaderID), Event: w.Header.Get("webhook-event-id"),
		Key: w.Header.Get("webhook-ordering-key"), Seq: seq, Secret: w.Header.Get(chaosSecretHeader), Body: w.Body, Status: w.Status,
		Signed: time.Unix(signed, 0), Arrived: w.Arrived, Answered: w.Answered}
}

// chaosStep is one action as it ran.
type chaosStep struct {
	Action       chaosAction
	Began, Ended time.Time
	Err          string   // "" when it was carried out
	Note         string   // what it came to, for the trace
	Events       []string // the events it published
	Delivery     string   // the delivery it replayed
}

// headerGrant says that a secret header value was given for a host.
type headerGrant struct {
	value, host string
	at          time.Time
}

// chaosErasure is one erasure of a tenant: when it was asked for, when it
// was answered (or found done), and whether it was done.
type chaosErasure struct {
	tenant          string
	began, answered time.Time
	done            bool
}

// resend is a delivery sent again on purpose: a replay of one delivery,
// or a recovery of the endpoint's deliveries published in [since, until).
type resend struct {
	endpoint, delivery string
	since, until       time.Time
	at                 time.Time
}

// covers reports whether r sends the delivery of an event published at
// ack to endpoint again.
func (r resend) covers(endpoint, delivery string, ack time.Time) bool {
	if r.delivery != "" {
		return r.delivery == delivery
	}
	return r.endpoint == endpoint && !ack.Before(r.since.Add(-time.Second)) && ack.Before(r.until.Add(time.Second))
}

// chaosProbe is one read of an event after its tenant was erased (or, a
// control, before): whether the event's marker was in the answer.
type chaosProbe struct {
	what, tenant, event string
	at                  time.Time
	control             bool // before the erasure: the marker must be found
	found               bool
	err                 string
}

// republish is the answer to an event published again.
type republish struct {
	tenant, event string
	at            time.Time
	why           string // "" when it was the same duplicate
}

// chaosRecorder keeps what the run saw. It is safe for concurrent use.
type chaosRecorder struct {
	mu          sync.Mutex // guards the fields below
	seen        []chaosSeen
	steps       []chaosStep
	grants      map[string][]headerGrant // by endpoint
	erasures    []chaosErasure
	resends     []resend
	probes      []chaosProbe
	republishes []republish
	firstSent   map[string]time.Time // by event: when its first publish call began
	violating   map[string]bool      // the events whose payload breaks its schema
}

func newChaosRecorder() *chaosRecorder {
	return &chaosRecorder{grants: map[string][]headerGrant{}, firstSent: map[string]time.Time{}, violating: map[string]bool{}}
}

// watched keeps a request the receiver read (the receiver's watcher).
func (r *chaosRecorder) watched(w Watched) {
	s := seenFrom(w)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
}

// note runs f under the recorder's lock.
func (r *chaosRecorder) note(f func(r *chaosRecorder)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// received returns the deliveries an endpoint got so far, each once, in
// the order they first came.
func (r *chaosRecorder) received(endpoint string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	have := map[string]bool{}
	for _, s := range r.seen {
		if s.Endpoint == endpoint && s.Delivery != "" && !have[s.Delivery] {
			have[s.Delivery] = true
			out = append(out, s.Delivery)
		}
	}
	return out
}
