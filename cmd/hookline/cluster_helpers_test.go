package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/eventstest"
	"github.com/hookline/hookline/events/postgres"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Helpers for the multi-node tests (failover_test.go): a fleet of `hookline
// serve` processes on one PostgreSQL log, receivers that remember when each
// webhook arrived, a paced publisher, and readers of the nodes' logs and of
// the shared event log.

// postgresURL returns HOOKLINE_POSTGRES_URL or skips the test, loudly: the
// multi-node tests need a shared log.
func postgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("HOOKLINE_POSTGRES_URL")
	if u == "" {
		t.Skip("!!! HOOKLINE_POSTGRES_URL is not set: SKIPPING the multi-node failover tests, which need a shared " +
			"PostgreSQL log (source /var/tmp/hookline-postgres/env, or run eval \"$(.ci/postgres.sh)\") !!!")
	}
	return u
}

// fleet is a set of `hookline serve` processes sharing one PostgreSQL log
// in a schema of their own, dropped when the test ends. Every node gets its
// own data directory (projections), the fleet's master key (a node on a
// shared log refuses to start without one) and the fleet's cluster secret,
// so that its members authenticate each other and encrypt their gossip, as
// in production. It is used from the test goroutine only.
type fleet struct {
	t         *testing.T
	dsn       string
	schema    string
	masterKey string // HOOKLINE_MASTER_KEY of every node
	secret    string // HOOKLINE_CLUSTER_SECRET of every node
}

// randomBase64 is the base64 of n random bytes: a key or a secret.
func randomBase64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.StdEncoding.EncodeToString(b)
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	dsn := postgresURL(t)
	f := &fleet{t: t, dsn: dsn, schema: eventstest.PostgresSchema(t, dsn, "t_"), masterKey: randomBase64(32), secret: randomBase64(32)}
	return f
}

// start runs a node on the fleet's log in dataDir, joining the gossip
// addresses given (none: a cluster of its own). It logs at debug level:
// the endpoint grain's "attempt" lines tell which node attempted what.
func (f *fleet) start(dataDir string, join ...string) *node {
	f.t.Helper()
	return f.startWith(dataDir, nil, join...)
}

// startWith is start with environment variables (KEY=value) that override
// the fleet's: another master key, another cluster secret.
func (f *fleet) startWith(dataDir string, env []string, join ...string) *node {
	t := f.t
	t.Helper()
	args := []string{"--store", f.dsn, "--store-schema", f.schema, "--log-level", "debug"}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	env = append([]string{"HOOKLINE_MASTER_KEY=" + f.masterKey, "HOOKLINE_CLUSTER_SECRET=" + f.secret}, env...)
	return startNodeEnv(t, dataDir, env, args...)
}

// stopAll stops the running nodes with SIGTERM, all at once (each takes a
// few seconds to leave the cluster).
func stopAll(t *testing.T, nodes ...*node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.stop(t) }()
	}
	wg.Wait()
}

// dumpLogs writes each node's log (nil nodes skipped) to
// $HOOKLINE_FAILOVER_LOGS/<test>-<i>.log when that variable names a
// directory, for a look after the run.
func dumpLogs(t *testing.T, nodes ...*node) {
	dir := os.Getenv("HOOKLINE_FAILOVER_LOGS")
	if dir == "" {
		return
	}
	for i, n := range nodes {
		if n == nil {
			continue
		}
		name := filepath.Join(dir, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), i))
		if err := os.WriteFile(name, []byte(n.output()), 0o600); err != nil {
			t.Logf("dump logs: %v", err)
		}
	}
}

// kill ends the node with SIGKILL and waits until it is gone.
func (n *node) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.done
}

var (
	startedLine = regexp.MustCompile(`msg="cluster node started" member_id=(\S+) .*gossip_address=(\S+)`)
	memberLine  = regexp.MustCompile(`msg="memberlist node (joined|left)" .*member_id=(\S+)`)
	attemptLine = regexp.MustCompile(`^time=(\S+) level=DEBUG msg=attempt endpoint_id=(\S+) .*delivery_id=(\S+)`)
	lineTime    = regexp.MustCompile(`^time=(\S+) `)
)

// gossip returns the node's memberlist address, the seed others join.
func (n *node) gossip(t *testing.T) string {
	t.Helper()
	m := startedLine.FindStringSubmatch(n.output())
	if m == nil {
		t.Fatalf("no \"cluster node started\" line in the node's log:\n%s", n.output())
	}
	return m[2]
}

// memberID returns the node's member id (unique per start).
func (n *node) memberID(t *testing.T) string {
	t.Helper()
	m := startedLine.FindStringSubmatch(n.output())
	if m == nil {
		t.Fatalf("no \"cluster node started\" line in the node's log:\n%s", n.output())
	}
	return m[1]
}

// members returns the ids of the members the node's memberlist sees alive,
// itself included, from its join and leave lines.
func (n *node) members() []string {
	alive := map[string]bool{}
	for _, m := range memberLine.FindAllStringSubmatch(n.output(), -1) {
		alive[m[2]] = m[1] == "joined"
	}
	var ids []string
	for id, ok := range alive {
		if ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// waitMembers waits until every node sees exactly the members given.
func waitMembers(t *testing.T, nodes ...*node) {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, n.memberID(t))
	}
	slices.Sort(want)
	waitForLong(t, 30*time.Second, func() (string, bool) {
		for _, n := range nodes {
			if got := n.members(); !slices.Equal(got, want) {
				return fmt.Sprintf("%s sees %v, want %v", n.memberID(t), got, want), false
			}
		}
		return "", true
	})
}

// firstLineAfter returns the time of the first line of the node's log
// matching re at or after from, and whether there is one.
func (n *node) firstLineAfter(re *regexp.Regexp, from time.Time) (time.Time, bool) {
	sc := bufio.NewScanner(strings.NewReader(n.output()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !re.MatchString(line) {
			continue
		}
		if at, ok := logTime(line); ok && !at.Before(from) {
			return at, true
		}
	}
	return time.Time{}, false
}

// count returns how many lines of the node's log match re.
func (n *node) count(re *regexp.Regexp) int {
	return len(re.FindAllStringIndex(n.output(), -1))
}

func logTime(line string) (time.Time, bool) {
	m := lineTime.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	return at, err == nil
}

// attemptSeen is one HTTP attempt a node's endpoint grain completed, from
// its "attempt" debug line (written when the answer came back; an attempt
// cut short by a kill or a stop leaves none).
type attemptSeen struct {
	at         time.Time
	endpointID string
	deliveryID string
}

// attempts returns the attempts the node completed, in log order.
func (n *node) attempts() []attemptSeen {
	var out []attemptSeen
	sc := bufio.NewScanner(strings.NewReader(n.output()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := attemptLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		out = append(out, attemptSeen{at: at, endpointID: m[2], deliveryID: m[3]})
	}
	return out
}

// placement returns, for each endpoint, the indexes (in nodes) of the
// nodes that completed an attempt for it within [from, to).
func placement(nodes []*node, from, to time.Time) map[string][]int {
	out := map[string][]int{}
	for i, n := range nodes {
		for _, a := range n.attempts() {
			if a.at.Before(from) || !a.at.Before(to) {
				continue
			}
			if !slices.Contains(out[a.endpointID], i) {
				out[a.endpointID] = append(out[a.endpointID], i)
			}
		}
	}
	return out
}

// attemptedBy returns, for each delivery, the indexes of the nodes that
// completed an attempt of it.
func attemptedBy(nodes []*node) map[string][]int {
	out := map[string][]int{}
	for i, n := range nodes {
		for _, a := range n.attempts() {
			if !slices.Contains(out[a.deliveryID], i) {
				out[a.deliveryID] = append(out[a.deliveryID], i)
			}
		}
	}
	return out
}

// arrival is one webhook a receiver accepted.
type arrival struct {
	at    time.Time
	id    string // webhook-id: the delivery id
	event string // webhook-event-id
	body  string
	cut   bool // the sender gave up before the answer: its attempt was cut short
}

// timedReceiver is a receiver (restart_test.go) that also remembers when
// each accepted webhook arrived, and may answer slowly.
type timedReceiver struct {
	*receiver
	delay time.Duration // how long it takes to answer; zero: at once

	mu       sync.Mutex // guards arrivals
	arrivals []arrival
}

func (r *timedReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Read the body first: the server notices a sender that goes away only
	// once the body has been read.
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	if r.delay > 0 {
		select { // a slow receiver, not a synchronisation
		case <-time.After(r.delay):
		case <-req.Context().Done():
		}
	}
	// A customer processes what it received even when the sender goes
	// away before the answer, so such a webhook counts as received.
	cut := req.Context().Err() != nil
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	r.receiver.ServeHTTP(sw, req)
	if sw.code < 300 {
		r.mu.Lock()
		r.arrivals = append(r.arrivals, arrival{at: time.Now(), id: req.Header.Get("webhook-id"), event: req.Header.Get("webhook-event-id"),
			body: string(body), cut: cut})
		r.mu.Unlock()
	}
}

func (r *timedReceiver) got() []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.arrivals)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// hook is one endpoint and the receiver behind it.
type hook struct {
	id  string
	rcv *timedReceiver
}

// createHooks creates n endpoints of the tenant, each with a receiver of
// its own, subscribed to eventType.
func createHooks(t *testing.T, a *api, n int, eventType string, settings *controlv1.EndpointSettings, delay time.Duration) []*hook {
	t.Helper()
	var hooks []*hook
	for i := range n {
		h := &hook{id: fmt.Sprintf("ep_%02d", i), rcv: &timedReceiver{receiver: &receiver{seen: map[string]int{}}, delay: delay}}
		srv := httptest.NewServer(h.rcv)
		t.Cleanup(srv.Close)
		s := &controlv1.EndpointSettings{Url: srv.URL + "/in", EventTypes: []string{eventType}}
		if settings != nil {
			s.RatePerSecond, s.Burst, s.MaxInFlight = settings.GetRatePerSecond(), settings.GetBurst(), settings.GetMaxInFlight()
		}
		// A member whose table names an owner it cannot reach (a split
		// brain, a move under way) answers UNAVAILABLE: retry, as a client
		// does.
		created := waitFor(t, func() (*controlv1.CreateEndpointResponse, bool) {
			r, err := a.endpoints().CreateEndpoint(a.ctx(), &controlv1.CreateEndpointRequest{EndpointId: h.id, Settings: s})
			if status.Code(err) == codes.Unavailable {
				return nil, false
			}
			if err != nil {
				t.Fatalf("create endpoint %s: %v", h.id, err)
			}
			return r, true
		})
		h.id = created.GetEndpoint().GetEndpointId() // the name scoped to the tenant
		wh, err := standardwebhooks.NewWebhook(created.GetSecret())
		if err != nil {
			t.Fatal(err)
		}
		h.rcv.receiver.mu.Lock()
		h.rcv.wh = wh
		h.rcv.receiver.mu.Unlock()
		hooks = append(hooks, h)
	}
	return hooks
}

// newTenant creates tenant acme with a quota far above the tests' load (the
// default, 100 attempts/s, would throttle them) and returns an API key.
func newTenant(t *testing.T, n *node) string {
	t.Helper()
	admin := n.as(t, adminToken)
	must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{
		TenantId: "acme", Name: "Acme", Quota: &hooklinev1.Quota{AttemptsPerSecond: 5000, MaxInFlight: 1000},
	}))
	return must(admin.tenants().IssueApiKey(admin.ctx(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})).GetApiKey()
}

// tally sums what the receivers got.
type tally struct {
	requests  int            // accepted webhooks, duplicates included
	unique    int            // distinct webhook-ids
	dupes     map[string]int // webhook-id -> extra copies, by delivery
	dupesByEP map[string]int // endpoint -> extra copies
	cut       int            // accepted webhooks whose sender gave up before the answer
	maxCopies int            // the most copies of one delivery
	badSigs   int
	unplanned []string             // webhook-ids nobody planned
	missing   []string             // planned deliveries never received
	arrivedBy map[string]time.Time // delivery id -> its first arrival
}

func countReceived(hooks []*hook, planned map[string]string) tally {
	tl := tally{dupes: map[string]int{}, dupesByEP: map[string]int{}, arrivedBy: map[string]time.Time{}}
	for _, h := range hooks {
		_, _, bad := h.rcv.counts()
		tl.badSigs += bad
		for _, a := range h.rcv.got() {
			tl.requests++
			if a.cut {
				tl.cut++
			}
			if _, ok := planned[a.id]; !ok {
				tl.unplanned = append(tl.unplanned, a.id)
			}
			if _, seen := tl.arrivedBy[a.id]; seen {
				tl.dupes[a.id]++
				tl.maxCopies = max(tl.maxCopies, tl.dupes[a.id]+1)
				tl.dupesByEP[h.id]++
				continue
			}
			tl.unique++
			tl.arrivedBy[a.id] = a.at
		}
	}
	for id := range planned {
		if _, ok := tl.arrivedBy[id]; !ok {
			tl.missing = append(tl.missing, id)
		}
	}
	slices.Sort(tl.missing)
	return tl
}

func (tl tally) duplicates() int { return tl.requests - tl.unique }

// dupesAround counts the extra copies of deliveries (copies after the
// first) that arrived before t0 and from t0 on.
func dupesAround(hooks []*hook, t0 time.Time) (before, after int) {
	var all []arrival
	for _, h := range hooks {
		all = append(all, h.rcv.got()...)
	}
	slices.SortFunc(all, func(a, b arrival) int { return a.at.Compare(b.at) })
	seen := map[string]bool{}
	for _, a := range all {
		switch {
		case !seen[a.id]:
			seen[a.id] = true
		case a.at.Before(t0):
			before++
		default:
			after++
		}
	}
	return before, after
}

// resumption describes an endpoint's arrivals around a fault at t0: the
// longest pause between consecutive arrivals that ends after t0, and when
// the arrivals resumed.
type resumption struct {
	gap     time.Duration
	resumed time.Time // the arrival that ended the longest pause
}

func resumeAfter(arrivals []arrival, t0, until time.Time) resumption {
	ts := make([]time.Time, 0, len(arrivals))
	for _, a := range arrivals {
		if !a.at.After(until) {
			ts = append(ts, a.at)
		}
	}
	slices.SortFunc(ts, time.Time.Compare)
	var r resumption
	for i := 1; i < len(ts); i++ {
		if !ts[i].After(t0) {
			continue
		}
		if g := ts[i].Sub(ts[i-1]); g > r.gap {
			r.gap, r.resumed = g, ts[i]
		}
	}
	return r
}

// publisher publishes events of one type at a fixed pace through the nodes
// it is given, until it has published max events or limit has passed. A
// publish that fails is retried, with the same event id (publishing is
// idempotent), on the next node.
type publisher struct {
	prefix, eventType string
	token             string

	mu        sync.Mutex // guards the fields below
	targets   []*api
	next      int
	planned   map[string]string   // delivery id -> endpoint id
	announced map[string][]string // event id -> the endpoints its publish planned
	events    int
	retried   int
	failures  []string

	stop chan struct{} // closed when the test ends: publish no more
	done chan struct{} // closed when run has returned
}

// startPublisher starts publishing through targets. The publisher ends by
// itself after max events or limit; it is stopped when the test ends.
func startPublisher(t *testing.T, token, prefix, eventType string, every time.Duration, max int, limit time.Duration, targets ...*node) *publisher {
	p := &publisher{prefix: prefix, eventType: eventType, token: token,
		planned: map[string]string{}, announced: map[string][]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	p.setTargets(t, targets...)
	t.Cleanup(func() { close(p.stop); <-p.done })
	go p.run(every, max, limit)
	return p
}

// setTargets makes the publisher publish through nodes from now on.
func (p *publisher) setTargets(t *testing.T, nodes ...*node) {
	var as []*api
	for _, n := range nodes {
		as = append(as, n.as(t, p.token))
	}
	p.mu.Lock()
	p.targets = as
	p.mu.Unlock()
}

func (p *publisher) target() *api {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.targets[p.next%len(p.targets)]
	p.next++
	return a
}

func (p *publisher) run(every time.Duration, max int, limit time.Duration) {
	defer close(p.done)
	end := time.Now().Add(limit)
	tick := time.NewTicker(every) // pacing of the load
	defer tick.Stop()
	for i := 0; i < max && time.Now().Before(end); i++ {
		select {
		case <-tick.C:
		case <-p.stop:
			return
		}
		p.publish(fmt.Sprintf("%s_%05d", p.prefix, i))
	}
}

// payloadOf is the payload the publisher publishes for an event.
func payloadOf(eventID string) string { return fmt.Sprintf(`{"id":%q}`, eventID) }

func (p *publisher) publish(eventID string) {
	req := &controlv1.PublishRequest{EventId: eventID, Type: p.eventType, Payload: []byte(payloadOf(eventID))}
	var last error
	for try := range 6 {
		a := p.target()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.token)
		res, err := a.events().Publish(ctx, req)
		cancel()
		if err != nil {
			last = err
			continue
		}
		p.mu.Lock()
		p.events++
		p.retried += try
		p.announced[eventID] = []string{}
		for _, d := range res.GetDeliveries() {
			p.planned[d.GetDeliveryId()] = d.GetEndpointId()
			p.announced[eventID] = append(p.announced[eventID], d.GetEndpointId())
		}
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	p.failures = append(p.failures, fmt.Sprintf("%s: %v", eventID, last))
	p.mu.Unlock()
}

// wait waits for the publisher to end and fails the test if an event could
// not be published through any node.
func (p *publisher) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the publisher did not end within 2 minutes")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failures) > 0 {
		t.Fatalf("%d events could not be published: %v", len(p.failures), p.failures)
	}
}

// plan returns a copy of the deliveries planned so far.
func (p *publisher) plan() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(p.planned))
	for k, v := range p.planned {
		out[k] = v
	}
	return out
}

// checkLedger checks the receivers against the test's own ledger, not the
// node's answers: every event published goes to every hook (all are
// subscribed to its type), so each hook must have received each event
// with the published bytes, and each publish must have planned exactly
// the hooks. It fails the test for each kind of miss, with examples.
func (p *publisher) checkLedger(t *testing.T, hooks []*hook) {
	t.Helper()
	p.mu.Lock()
	announced := make(map[string][]string, len(p.announced))
	for ev, eps := range p.announced {
		announced[ev] = slices.Sorted(slices.Values(eps))
	}
	p.mu.Unlock()
	var want []string
	for _, h := range hooks {
		want = append(want, h.id)
	}
	slices.Sort(want)
	var lost, mismatch, badBody []string
	for _, h := range hooks {
		got := map[string]bool{}
		for _, a := range h.rcv.got() {
			if a.body != payloadOf(a.event) {
				badBody = append(badBody, a.id)
			}
			got[a.event] = true
		}
		for ev := range announced {
			if !got[ev] {
				lost = append(lost, h.id+"/"+ev)
			}
		}
	}
	for ev, eps := range announced {
		if !slices.Equal(eps, want) {
			mismatch = append(mismatch, fmt.Sprintf("%s planned %v", ev, eps))
		}
	}
	for _, miss := range []struct {
		what string
		ids  []string
	}{{"expected deliveries not received", lost}, {"publishes planned other endpoints than the subscribed hooks", mismatch},
		{"webhooks received with other bytes than published", badBody}} {
		if len(miss.ids) > 0 {
			slices.Sort(miss.ids)
			t.Errorf("%d %s (e.g. %v)", len(miss.ids), miss.what, first(miss.ids, 5))
		}
	}
}

// outcome is one outcome event of a delivery stream.
type outcome struct {
	typ         string // AttemptSucceeded, AttemptFailed, DeliveryExpired
	number      int32  // the attempt number (0 for DeliveryExpired)
	terminal    bool
	activation  string // the writing activation, from the event's cause
	replayAsked bool   // a ReplayRequested, not an outcome
}

// readOutcomes reads the whole shared log and returns the events of every
// delivery stream, by delivery id, in revision order.
func (f *fleet) readOutcomes(t *testing.T) map[string][]outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := postgres.Open(ctx, postgres.Config{DSN: f.dsn, Schema: f.schema})
	if err != nil {
		t.Fatalf("open the shared log: %v", err)
	}
	defer l.Close()
	out := map[string][]outcome{}
	for from := events.Start; ; {
		recs, err := l.ReadAll(ctx, from, 2000)
		if err != nil {
			t.Fatalf("read the shared log: %v", err)
		}
		for i := range recs {
			r := &recs[i]
			from = r.Position
			if events.Category(r.Stream) != events.DeliveryCategory {
				continue
			}
			id := strings.TrimPrefix(r.Stream, events.DeliveryCategory+"-")
			msg, err := events.Decode(r)
			if err != nil {
				t.Fatalf("decode %s@%d: %v", r.Stream, r.Revision, err)
			}
			o := outcome{typ: r.Type, activation: activationOf(r.Metadata)}
			switch m := msg.(type) {
			case *hooklinev1.AttemptSucceeded:
				o.number, o.terminal = m.GetAttempt().GetNumber(), true
			case *hooklinev1.AttemptFailed:
				o.number, o.terminal = m.GetAttempt().GetNumber(), m.GetNextAttemptAt() == nil
			case *hooklinev1.DeliveryExpired:
				o.terminal = true
			case *hooklinev1.ReplayRequested:
				o.replayAsked = true
			}
			out[id] = append(out[id], o)
		}
		if len(recs) < 2000 {
			return out
		}
	}
}

// activationOf returns the activation id that the endpoint grain puts at
// the end of a delivery event's cause ("delivery.<type>@<rev>/<digest>/<activation>").
func activationOf(meta []byte) string {
	var m events.Metadata
	if err := json.Unmarshal(meta, &m); err != nil {
		return ""
	}
	if i := strings.LastIndexByte(m.Cause, '/'); i >= 0 {
		return m.Cause[i+1:]
	}
	return ""
}

// checkSingleWriter checks the single-writer rule on the delivery streams
// of the planned deliveries: each one ended with exactly one terminal
// outcome, a success, as its last event; no two outcomes carry the same
// attempt number. It returns the activations that wrote each endpoint's
// outcomes.
func checkSingleWriter(t *testing.T, planned map[string]string, log map[string][]outcome) map[string]map[string]int {
	t.Helper()
	writers := map[string]map[string]int{}
	bad := 0
	for id, ep := range planned {
		evs := log[id]
		numbers := map[int32]bool{}
		terminal := 0
		for _, o := range evs {
			if o.replayAsked {
				continue
			}
			if numbers[o.number] {
				t.Errorf("delivery %s: two outcomes of attempt %d (single-writer rule broken): %+v", id, o.number, evs)
			}
			numbers[o.number] = true
			if o.terminal {
				terminal++
			}
			if writers[ep] == nil {
				writers[ep] = map[string]int{}
			}
			writers[ep][o.activation]++
		}
		switch {
		case len(evs) == 0:
			bad++
			if bad <= 5 {
				t.Errorf("delivery %s (endpoint %s) has no outcome in the log", id, ep)
			}
		case terminal != 1 || !evs[len(evs)-1].terminal || evs[len(evs)-1].typ != "AttemptSucceeded":
			bad++
			if bad <= 5 {
				t.Errorf("delivery %s (endpoint %s): want exactly one terminal outcome, a success, last; got %+v", id, ep, evs)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d deliveries did not end with exactly one success", bad, len(planned))
	}
	return writers
}

// waitTerminal waits until every planned delivery has a terminal outcome in
// the shared log, and returns the log's delivery streams.
func (f *fleet) waitTerminal(t *testing.T, planned map[string]string) map[string][]outcome {
	t.Helper()
	var log map[string][]outcome
	waitForLong(t, 60*time.Second, func() (string, bool) {
		log = f.readOutcomes(t)
		open := 0
		for id := range planned {
			evs := log[id]
			if len(evs) == 0 || !evs[len(evs)-1].terminal {
				open++
			}
		}
		return fmt.Sprintf("%d of %d deliveries not ended in the log", open, len(planned)), open == 0
	})
	return log
}

// waitReceived waits until every planned delivery reached its receiver.
func waitReceived(t *testing.T, hooks []*hook, planned map[string]string, within time.Duration) tally {
	t.Helper()
	var tl tally
	waitForLong(t, within, func() (string, bool) {
		tl = countReceived(hooks, planned)
		return fmt.Sprintf("%d of %d planned deliveries not received (e.g. %v)", len(tl.missing), len(planned), first(tl.missing, 5)), len(tl.missing) == 0
	})
	return tl
}

func first[T any](s []T, n int) []T { return s[:min(n, len(s))] }
