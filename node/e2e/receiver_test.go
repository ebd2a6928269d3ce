package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// signatureTolerance is the Standard Webhooks library's timestamp
// tolerance, applied by hand when the sender runs on an injected clock.
const signatureTolerance = 5 * time.Minute

// hookReceiver is a webhook receiver on 127.0.0.1 for end-to-end tests:
// one route per endpoint (its URL path), each with the endpoint's signing
// secret and a responder. It checks the signature of every request with the
// independent Standard Webhooks library before answering, and records every
// request it gets (real time, webhook-id, the status it answered). It is
// safe for concurrent use.
type hookReceiver struct {
	srv *httptest.Server
	// clock is the sender's clock when it is injected: webhook-timestamp
	// then follows it, not the real time, so the library checks the
	// signature and the receiver checks the timestamp against clock. Nil
	// means the real clock and the library's own check of both.
	clock func() time.Time

	mu       sync.Mutex // guards the fields below
	routes   map[string]*hookRoute
	got      []receipt
	problems []string // requests that failed verification, and why
	inFlight int      // requests being answered
	maxIn    int      // the most answered at once
}

// hookRoute is one endpoint's path on the receiver.
type hookRoute struct {
	wh      *standardwebhooks.Webhook
	respond respondFunc
}

// respondFunc answers one verified request; n counts the requests with its
// webhook-id so far, this one included. It may block (a slow receiver).
type respondFunc func(w http.ResponseWriter, r *http.Request, n int)

// receipt is one request as the receiver got it.
type receipt struct {
	path, id, eventID string
	eventType         string    // webhook-event-type
	body              []byte    // as received (and verified)
	at                time.Time // real time of arrival
	timestamp         time.Time // webhook-timestamp
	status            int       // the status answered
	// traceparent and tracestate are the request's W3C trace context
	// headers, signatures its webhook-signature.
	traceparent, tracestate, signatures string
	// orderingKey and sequence are webhook-ordering-key and
	// webhook-sequence (0 when absent).
	orderingKey string
	sequence    int64
}

// answer answers every request with status.
func answer(status int) respondFunc {
	return func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(status) }
}

// newHookReceiver starts a receiver that closes at the end of the test.
func newHookReceiver(t *testing.T, clock func() time.Time) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{clock: clock, routes: map[string]*hookRoute{}}
	rc.srv = httptest.NewServer(rc)
	t.Cleanup(rc.srv.Close)
	return rc
}

// url returns the URL of the route at path ("/ep_1").
func (rc *hookReceiver) url(path string) string { return rc.srv.URL + path }

// handle adds the route at path for an endpoint whose signing secret is
// secret.
func (rc *hookReceiver) handle(path, secret string, respond respondFunc) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("secret of %s: %w", path, err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.routes[path] = &hookRoute{wh: wh, respond: respond}
	return nil
}

func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		rc.reject(w, "%s: read body: %v", r.URL.Path, err)
		return
	}
	rc.mu.Lock()
	rt := rc.routes[r.URL.Path]
	rc.mu.Unlock()
	if rt == nil {
		rc.reject(w, "%s: no such route", r.URL.Path)
		return
	}
	if err := rc.verify(rt.wh, body, r.Header); err != nil {
		rc.reject(w, "%s %s: %v", r.URL.Path, r.Header.Get("webhook-id"), err)
		return
	}
	unix, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	rec := receipt{
		path: r.URL.Path, id: r.Header.Get("webhook-id"), eventID: r.Header.Get("webhook-event-id"),
		eventType: r.Header.Get("webhook-event-type"), body: body, at: at, timestamp: time.Unix(unix, 0),
		traceparent: r.Header.Get("traceparent"), tracestate: r.Header.Get("tracestate"),
		signatures: r.Header.Get("webhook-signature"), orderingKey: r.Header.Get("webhook-ordering-key"),
	}
	rec.sequence, _ = strconv.ParseInt(r.Header.Get("webhook-sequence"), 10, 64)
	rc.mu.Lock()
	n := 1
	for _, g := range rc.got {
		if g.id == rec.id {
			n++
		}
	}
	i := len(rc.got)
	rc.got = append(rc.got, rec)
	rc.inFlight++
	rc.maxIn = max(rc.maxIn, rc.inFlight)
	rc.mu.Unlock()

	sw := &statusWriter{ResponseWriter: w}
	rt.respond(sw, r, n)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	rc.mu.Lock()
	rc.got[i].status = sw.status
	rc.inFlight--
	rc.mu.Unlock()
}

// verify checks a request's signature with the Standard Webhooks library.
func (rc *hookReceiver) verify(wh *standardwebhooks.Webhook, body []byte, h http.Header) error {
	if rc.clock == nil {
		return wh.Verify(body, h)
	}
	if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
		return err
	}
	unix, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %w", h.Get("webhook-timestamp"), err)
	}
	// The test only moves the clock forward, and only when no attempt is
	// expected to be under way: the timestamp may not be ahead of it.
	if ts, now := time.Unix(unix, 0), rc.clock(); ts.After(now.Add(signatureTolerance)) {
		return fmt.Errorf("webhook-timestamp %v is ahead of the sender's clock %v", ts, now)
	}
	return nil
}

func (rc *hookReceiver) reject(w http.ResponseWriter, format string, args ...any) {
	rc.mu.Lock()
	rc.problems = append(rc.problems, fmt.Sprintf(format, args...))
	rc.mu.Unlock()
	http.Error(w, "signature verification failed", http.StatusUnauthorized)
}

// receipts returns the requests with webhook-id id, in order of arrival.
func (rc *hookReceiver) receipts(id string) []receipt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []receipt
	for _, g := range rc.got {
		if g.id == id {
			out = append(out, g)
		}
	}
	return out
}

// onPathReceipts returns the requests that came to path, in order of
// arrival.
func (rc *hookReceiver) onPathReceipts(path string) []receipt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []receipt
	for _, g := range rc.got {
		if g.path == path {
			out = append(out, g)
		}
	}
	return out
}

// count returns how many requests had webhook-id id.
func (rc *hookReceiver) count(id string) int { return len(rc.receipts(id)) }

// onPath returns how many requests came to path.
func (rc *hookReceiver) onPath(path string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, g := range rc.got {
		if g.path == path {
			n++
		}
	}
	return n
}

// total returns how many verified requests came, and to how many distinct
// webhook-ids.
func (rc *hookReceiver) total() (requests, ids int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]bool{}
	for _, g := range rc.got {
		seen[g.id] = true
	}
	return len(rc.got), len(seen)
}

// concurrency returns how many requests the receiver is answering now,
// and the most it answered at once.
func (rc *hookReceiver) concurrency() (now, most int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.inFlight, rc.maxIn
}

// rejected returns the requests that failed verification.
func (rc *hookReceiver) rejected() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.problems...)
}

// statusWriter remembers the status a responder wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
