package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/verify"
)

// maxBody bounds the body the receiver reads; Hookline payloads are far
// smaller.
const maxBody = 4 << 20

// DefaultMaxHang bounds how long a hanging answer waits for the caller to
// give up, so that a receiver never holds a connection forever.
const DefaultMaxHang = 2 * time.Minute

// Behaviour is how the receiver answers one endpoint. The zero value answers
// 200 at once.
type Behaviour struct {
	// Mix is the status mix: weights need not add up to 1. Empty means 200.
	Mix []StatusWeight `json:"mix,omitempty"`
	// Latency is waited before answering (or until the caller gives up).
	Latency time.Duration `json:"latency,omitempty"`
	// RetryAfter, when set, is sent as Retry-After (whole seconds) on every
	// answer that is not a 2xx.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Hang answers nothing: the request waits until the caller gives up, the
	// receiver stops or MaxHang passes.
	Hang bool `json:"hang,omitempty"`
	// Echo answers with the first echoBytes of the request's body, which
	// the node keeps as the attempt's response prefix.
	Echo bool `json:"echo,omitempty"`
}

// StatusWeight is one entry of a status mix.
type StatusWeight struct {
	Status int     `json:"status"`
	Weight float64 `json:"weight"`
}

// ParseMix parses a status mix such as "200:0.9,500:0.1". A bare status
// ("429") has weight 1.
func ParseMix(s string) ([]StatusWeight, error) {
	var mix []StatusWeight
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		code, weight, hasWeight := strings.Cut(part, ":")
		st, err := strconv.Atoi(code)
		if err != nil || st < 200 || st > 599 {
			return nil, fmt.Errorf("status mix %q: %q is not an HTTP status from 200 to 599", s, code)
		}
		w := 1.0
		if hasWeight {
			if w, err = strconv.ParseFloat(weight, 64); err != nil || w < 0 {
				return nil, fmt.Errorf("status mix %q: weight %q is not a number >= 0", s, weight)
			}
		}
		mix = append(mix, StatusWeight{Status: st, Weight: w})
	}
	return mix, nil
}

// status draws a status from the mix.
func (b Behaviour) status() int {
	var total float64
	for _, m := range b.Mix {
		total += m.Weight
	}
	if total <= 0 {
		return http.StatusOK
	}
	x := rand.Float64() * total
	for _, m := range b.Mix {
		if x < m.Weight {
			return m.Status
		}
		x -= m.Weight
	}
	return b.Mix[len(b.Mix)-1].Status
}

// Record is what the receiver knows about one webhook-id.
type Record struct {
	Endpoint  string    `json:"endpoint"`
	EventID   string    `json:"event_id,omitempty"` // webhook-event-id of the first attempt
	Attempts  int       `json:"attempts"`
	Successes int       `json:"successes"` // attempts answered with a 2xx
	FirstSeen time.Time `json:"first_seen"`
	FirstOK   time.Time `json:"first_ok,omitzero"`
	bodyHash  uint64    // the first attempt's body
	// bodies are the distinct body hashes of its attempts, oks its 2xx
	// answers in order: what a ledger checks the bytes and explains the
	// duplicates by.
	bodies []uint64
	oks    []Receipt
}

// Receipt is one 2xx answer of the receiver.
type Receipt struct {
	At   time.Time // when the request was read
	Body uint64    // BodyHash of its body
	// Cut says the sender had gone before the answer was written (it gave
	// up waiting): it cannot know the webhook arrived.
	Cut bool
}

// BodyHash is the hash the receiver keeps of a body (FNV-1a, 64 bits).
func BodyHash(body []byte) uint64 {
	h := fnv.New64a()
	h.Write(body)
	return h.Sum64()
}

// Stats are the receiver's counts.
type Stats struct {
	// Requests is every request, verified or not.
	Requests int64 `json:"requests"`
	// BadSignature counts requests refused with 401 (missing headers, bad
	// or stale signature, unknown endpoint secret).
	BadSignature int64 `json:"bad_signature"`
	// Attempts is every verified request; Unique the distinct webhook-ids.
	Attempts int64 `json:"attempts"`
	Unique   int64 `json:"unique"`
	// Succeeded is the webhook-ids answered with a 2xx at least once.
	Succeeded int64 `json:"succeeded"`
	// Duplicates counts 2xx answers beyond the first per webhook-id: the
	// deliveries a consumer sees twice. Each one shares its webhook-id with
	// an earlier attempt by construction; DuplicateIDs counts those ids.
	Duplicates   int64 `json:"duplicates"`
	DuplicateIDs int64 `json:"duplicate_ids"`
	// Retries counts attempts beyond the first per webhook-id.
	Retries int64 `json:"retries"`
	// BodyMismatch counts attempts whose body differs from the first
	// attempt of the same webhook-id (must be 0: immutable bytes).
	BodyMismatch int64 `json:"body_mismatch"`
	// Hung counts answers withheld until the caller gave up.
	Hung int64 `json:"hung"`
	// MaxAttempts is the most attempts seen for one webhook-id.
	MaxAttempts int            `json:"max_attempts_per_id"`
	ByStatus    map[string]int `json:"by_status"`
}

// Receiver is an HTTP receiver of signed webhooks that verifies, records and
// answers them as told. Paths /e/{endpoint} select a per-endpoint behaviour
// and secret; any other POST path uses the defaults. GET /stats answers the
// counts as JSON; PUT /admin/behaviour/{endpoint} (or "default") and
// PUT /admin/secret/{endpoint} change the behaviour and secrets at run time.
//
// A Receiver is safe for concurrent use. Create it with NewReceiver.
type Receiver struct {
	srv *http.Server
	ln  net.Listener
	// also counts the listeners ListenAlso serves (other hosts of the same
	// receiver), which Run waits for; alsoErr is what ended them, beside
	// Run's closing.
	also     sync.WaitGroup
	alsoErr  error // guarded by mu
	maxHang  time.Duration
	stopping chan struct{}
	stopOnce sync.Once

	mu        sync.Mutex // guards every field below
	def       Behaviour
	behaviour map[string]Behaviour
	defSecret *verify.Verifier
	secrets   map[string]*verify.Verifier
	given     map[string][]string // the secrets of each verifier in secrets
	records   map[string]*Record
	attemptBy map[string]int64 // verified attempts, by endpoint
	okBy      map[string]int64 // webhook-ids answered 2xx, by endpoint
	// ordered are the requests that carried webhook-ordering-key, by
	// endpoint and key, in the order they were read.
	ordered map[orderedKey][]OrderedArrival
	// failKey's requests are answered 503 until failUntil.
	failKey   string
	failUntil time.Time
	stats     Stats
	// watcher, when set, is told of every request (SetWatcher).
	watcher watcher
}

// orderedKey names one endpoint's ordering key.
type orderedKey struct{ endpoint, key string }

// OrderedArrival is one request of an ordered delivery: its event and
// whether it was answered 2xx.
type OrderedArrival struct {
	EventID string
	OK      bool
	// Sequence is the webhook-sequence the node sent (0 none): not judged,
	// shown with a violation.
	Sequence int64
}

// NewReceiver listens on addr (loopback, e.g. 127.0.0.1:0) with the default
// secrets (whsec_...; may be empty when every endpoint gets its own through
// SetSecret) and behaviour. Serve it with Run.
func NewReceiver(addr string, secrets []string, def Behaviour) (*Receiver, error) {
	r := &Receiver{
		maxHang:   DefaultMaxHang,
		stopping:  make(chan struct{}),
		def:       def,
		behaviour: map[string]Behaviour{},
		secrets:   map[string]*verify.Verifier{},
		given:     map[string][]string{},
		records:   map[string]*Record{},
		attemptBy: map[string]int64{},
		okBy:      map[string]int64{},
		ordered:   map[orderedKey][]OrderedArrival{},
		stats:     Stats{ByStatus: map[string]int{}},
	}
	if len(secrets) > 0 {
		v, err := verify.New(secrets[0], secrets[1:]...)
		if err != nil {
			return nil, fmt.Errorf("--secret: %w", err)
		}
		r.defSecret = v
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("receiver listen %s: %w", addr, err)
	}
	r.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", r.serveStats)
	mux.HandleFunc("PUT /admin/behaviour/{endpoint}", r.serveSetBehaviour)
	mux.HandleFunc("PUT /admin/secret/{endpoint}", r.serveSetSecret)
	mux.HandleFunc("POST /e/{endpoint}", r.serveWebhook)
	mux.HandleFunc("POST /", r.serveWebhook)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return r, nil
}

// Addr is the address the receiver listens on.
func (r *Receiver) Addr() string { return r.ln.Addr().String() }

// URL is the webhook URL of one endpoint on this receiver.
func (r *Receiver) URL(endpoint string) string {
	return r.URLAt(r.Addr(), endpoint)
}

// Run serves until ctx ends, then releases hanging requests and closes.
func (r *Receiver) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- r.srv.Serve(r.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("receiver: %w", err)
	case <-ctx.Done():
	}
	r.stopOnce.Do(func() { close(r.stopping) })
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(sctx); err != nil {
		r.srv.Close()
	}
	err := <-errc
	r.also.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("receiver: %w", errors.Join(err, r.alsoErr))
	}
	if r.alsoErr != nil {
		return fmt.Errorf("receiver: %w", r.alsoErr)
	}
	return nil
}

// SetDefault changes the behaviour of endpoints without their own.
func (r *Receiver) SetDefault(b Behaviour) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.def = b
}

// SetBehaviour changes one endpoint's behaviour.
func (r *Receiver) SetBehaviour(endpoint string, b Behaviour) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.behaviour[endpoint] = b
}

// SetSecret sets the secrets that verify one endpoint's requests.
func (r *Receiver) SetSecret(endpoint string, secrets ...string) error {
	if len(secrets) == 0 {
		return errors.New("set secret: give at least one whsec_ secret")
	}
	v, err := verify.New(secrets[0], secrets[1:]...)
	if err != nil {
		return fmt.Errorf("set secret of %s: %w", endpoint, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets[endpoint] = v
	r.given[endpoint] = slices.Clone(secrets)
	return nil
}

// AddSecret adds a secret to those that verify one endpoint's requests
// (a rotation: the earlier ones go on signing beside it).
func (r *Receiver) AddSecret(endpoint, secret string) error {
	r.mu.Lock()
	secrets := append(slices.Clone(r.given[endpoint]), secret)
	r.mu.Unlock()
	return r.SetSecret(endpoint, secrets...)
}

// Stats returns a copy of the counts.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.ByStatus = make(map[string]int, len(r.stats.ByStatus))
	for k, v := range r.stats.ByStatus {
		s.ByStatus[k] = v
	}
	return s
}

// Lookup calls f with the record of each id that the receiver has seen,
// under the receiver's lock: f must not call the receiver.
func (r *Receiver) Lookup(ids []string, f func(id string, rec Record)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if rec, ok := r.records[id]; ok {
			f(id, *rec)
		}
	}
}

// Each calls f with every webhook-id and its record, under the receiver's
// lock: f must not call the receiver, nor keep rec's receipts.
func (r *Receiver) Each(f func(id string, rec *Record, oks []Receipt, bodies []uint64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, rec := range r.records {
		f(id, rec, rec.oks, rec.bodies)
	}
}

// SucceededFor counts the webhook-ids answered with a 2xx on the given
// endpoints, and the verified attempts on them.
func (r *Receiver) SucceededFor(endpoints []string) (ok, attempts int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ep := range endpoints {
		ok += r.okBy[ep]
		attempts += r.attemptBy[ep]
	}
	return ok, attempts
}

// Records returns a copy of every record, by webhook-id.
func (r *Receiver) Records() map[string]Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Record, len(r.records))
	for id, rec := range r.records {
		out[id] = *rec
	}
	return out
}

func (r *Receiver) serveWebhook(w http.ResponseWriter, req *http.Request) {
	endpoint := req.PathValue("endpoint")
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody))
	now := time.Now()
	r.mu.Lock()
	r.stats.Requests++
	b, ok := r.behaviour[endpoint]
	if !ok {
		b = r.def
	}
	r.mu.Unlock()
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !r.signed(endpoint, req.Header, body) {
		r.watch(Watched{Endpoint: endpoint, Host: req.Host, Header: req.Header, Body: BodyHash(body), Status: http.StatusUnauthorized, Arrived: now, Answered: time.Now()})
		http.Error(w, "signature does not verify", http.StatusUnauthorized)
		return
	}

	status := 0 // hung
	if !b.Hang {
		status = b.status()
	}
	if r.failing(req.Header.Get("webhook-ordering-key"), now) {
		status = http.StatusServiceUnavailable
	}
	id := req.Header.Get(verify.HeaderID)
	nth := r.record(id, req.Header.Get("webhook-event-id"), endpoint, body, status, now)
	if key := req.Header.Get("webhook-ordering-key"); key != "" {
		seq, _ := strconv.ParseInt(req.Header.Get("webhook-sequence"), 10, 64)
		r.recordOrdered(endpoint, key, req.Header.Get("webhook-event-id"), seq, status)
	}

	if b.Hang {
		r.hang(req.Context())
		return
	}
	if b.Latency > 0 {
		t := time.NewTimer(b.Latency)
		select {
		case <-t.C:
		case <-req.Context().Done():
		case <-r.stopping:
		}
		t.Stop()
	}
	if nth >= 0 && req.Context().Err() != nil {
		r.cut(id, nth)
	}
	if status/100 != 2 && b.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((b.RetryAfter+time.Second-1)/time.Second)))
	}
	r.watch(Watched{Endpoint: endpoint, Host: req.Host, Header: req.Header, Body: BodyHash(body), Status: status, Arrived: now, Answered: time.Now()})
	w.WriteHeader(status)
	if b.Echo {
		w.Write(body[:min(len(body), echoBytes)])
	}
}

// cut marks the ok-th 2xx answer of id as written after its sender had
// gone.
func (r *Receiver) cut(id string, ok int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.records[id]; rec != nil && ok < len(rec.oks) {
		rec.oks[ok].Cut = true
	}
}

// hang waits until the caller gives up, the receiver stops or maxHang passes.
func (r *Receiver) hang(ctx context.Context) {
	t := time.NewTimer(r.maxHang)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-r.stopping:
	case <-t.C:
	}
}

// record counts one verified attempt and returns the index of its 2xx
// answer among the webhook-id's (-1 when it is not one).
func (r *Receiver) record(id, eventID, endpoint string, body []byte, status int, now time.Time) int {
	sum := BodyHash(body)
	ok := status/100 == 2

	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Attempts++
	r.attemptBy[endpoint]++
	r.stats.ByStatus[statusKey(status)]++
	if status == 0 {
		r.stats.Hung++
	}
	rec, seen := r.records[id]
	if !seen {
		rec = &Record{Endpoint: endpoint, EventID: eventID, FirstSeen: now, bodyHash: sum, bodies: []uint64{sum}}
		r.records[id] = rec
		r.stats.Unique++
	} else {
		r.stats.Retries++
		if rec.bodyHash != sum {
			r.stats.BodyMismatch++
		}
		if !slices.Contains(rec.bodies, sum) {
			rec.bodies = append(rec.bodies, sum)
		}
	}
	rec.Attempts++
	r.stats.MaxAttempts = max(r.stats.MaxAttempts, rec.Attempts)
	if !ok {
		return -1
	}
	rec.Successes++
	rec.oks = append(rec.oks, Receipt{At: now, Body: sum})
	switch rec.Successes {
	case 1:
		rec.FirstOK = now
		r.stats.Succeeded++
		r.okBy[rec.Endpoint]++
	case 2:
		r.stats.DuplicateIDs++
		r.stats.Duplicates++
	default:
		r.stats.Duplicates++
	}
	return len(rec.oks) - 1
}

// FailKey answers every request of ordering key key with 503 until until.
func (r *Receiver) FailKey(key string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failKey, r.failUntil = key, until
}

func (r *Receiver) failing(key string, now time.Time) bool {
	if key == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return key == r.failKey && now.Before(r.failUntil)
}

// recordOrdered notes a request of an ordered delivery. The node sends a
// key's next request only once the previous one was answered, so the
// requests of one key are noted in the order they were sent.
func (r *Receiver) recordOrdered(endpoint, key, eventID string, seq int64, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := orderedKey{endpoint, key}
	r.ordered[k] = append(r.ordered[k], OrderedArrival{EventID: eventID, OK: status/100 == 2, Sequence: seq})
}

// EachOrdered calls f with each endpoint's ordering key and its requests,
// in the order they were read, under the receiver's lock.
func (r *Receiver) EachOrdered(f func(endpoint, key string, arrivals []OrderedArrival)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range r.ordered {
		f(k.endpoint, k.key, a)
	}
}

func statusKey(status int) string {
	if status == 0 {
		return "hung"
	}
	return strconv.Itoa(status)
}

func (r *Receiver) serveStats(w http.ResponseWriter, req *http.Request) {
	out := struct {
		Stats
		IDs map[string]Record `json:"ids,omitempty"`
	}{Stats: r.Stats()}
	if req.URL.Query().Get("ids") != "" {
		out.IDs = r.Records()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// behaviourJSON is the body of PUT /admin/behaviour/{endpoint}: durations
// as Go strings ("50ms"), the mix as in --status-mix.
type behaviourJSON struct {
	StatusMix  string `json:"status_mix"`
	Latency    string `json:"latency"`
	RetryAfter string `json:"retry_after"`
	Hang       bool   `json:"hang"`
}

func (b behaviourJSON) parse() (Behaviour, error) {
	var out Behaviour
	var err error
	if out.Mix, err = ParseMix(b.StatusMix); err != nil {
		return out, err
	}
	for _, d := range []struct {
		name string
		text string
		to   *time.Duration
	}{{"latency", b.Latency, &out.Latency}, {"retry_after", b.RetryAfter, &out.RetryAfter}} {
		if d.text == "" {
			continue
		}
		if *d.to, err = time.ParseDuration(d.text); err != nil || *d.to < 0 {
			return out, fmt.Errorf("%s %q: give a duration such as 50ms or 5s", d.name, d.text)
		}
	}
	out.Hang = b.Hang
	return out, nil
}

func (r *Receiver) serveSetBehaviour(w http.ResponseWriter, req *http.Request) {
	var in behaviourJSON
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<16)).Decode(&in); err != nil {
		http.Error(w, `body: give JSON {"status_mix":"200:0.9,500:0.1","latency":"50ms","retry_after":"5s","hang":false}`, http.StatusBadRequest)
		return
	}
	b, err := in.parse()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ep := req.PathValue("endpoint"); ep == "default" {
		r.SetDefault(b)
	} else {
		r.SetBehaviour(ep, b)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *Receiver) serveSetSecret(w http.ResponseWriter, req *http.Request) {
	var in struct {
		Secrets []string `json:"secrets"`
	}
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<16)).Decode(&in); err != nil {
		http.Error(w, `body: give JSON {"secrets":["whsec_..."]}`, http.StatusBadRequest)
		return
	}
	if err := r.SetSecret(req.PathValue("endpoint"), in.Secrets...); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// signed checks a webhook's signature with endpoint's secrets (or the
// default ones), counting a refusal.
func (r *Receiver) signed(endpoint string, h http.Header, body []byte) bool {
	r.mu.Lock()
	v, ok := r.secrets[endpoint]
	if !ok {
		v = r.defSecret
	}
	r.mu.Unlock()
	if v != nil && v.Verify(h, body) == nil {
		return true
	}
	r.mu.Lock()
	r.stats.BadSignature++
	r.mu.Unlock()
	return false
}

// Take is the receiver's side of a pulled delivery: it checks the
// message's signature with endpoint's secrets, as for a request, and
// records it as answered 2xx. It reports whether the signature held (a
// consumer acknowledges only those).
func (r *Receiver) Take(endpoint string, h http.Header, body []byte) bool {
	now := time.Now()
	r.mu.Lock()
	r.stats.Requests++
	r.mu.Unlock()
	if !r.signed(endpoint, h, body) {
		return false
	}
	r.record(h.Get(verify.HeaderID), h.Get("webhook-event-id"), endpoint, body, http.StatusOK, now)
	return true
}
