package attempt_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// tokenServer is an OAuth2 token endpoint on loopback: it checks the
// client's credentials, issues numbered tokens of a given lifetime, and
// may be told to fail.
type tokenServer struct {
	*receiver
	lifetime int64 // expires_in, seconds
	requests atomic.Int64
	down     atomic.Bool

	mu   sync.Mutex
	form []string // scope and audience of each request
}

func newTokenServer(t *testing.T, lifetime int64) *tokenServer {
	ts := &tokenServer{lifetime: lifetime}
	ts.receiver = newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ts.requests.Add(1)
		id, secret, ok := r.BasicAuth()
		switch {
		case ts.down.Load():
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
			return
		case !ok || id != "hookline" || secret != "s3cret" || r.FormValue("grant_type") != "client_credentials":
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		ts.mu.Lock()
		ts.form = append(ts.form, r.FormValue("scope")+"|"+r.FormValue("audience"))
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, n, ts.lifetime)
	}), false)
	return ts
}

func (ts *tokenServer) grant() *attempt.OAuth2 {
	return &attempt.OAuth2{TokenURL: ts.URL + "/token", ClientID: "hookline", ClientSecret: "s3cret", Scopes: []string{"hooks:write", "b"}, Audience: "https://rcv"}
}

// TestOAuth2Tokens: attempts share one token until shortly before it
// expires; concurrent attempts make one token request; a receiver that
// refuses a cached token gets a new one within the same attempt; a token
// endpoint that fails makes the attempt fail with ERROR_CLASS_TOKEN,
// sends nothing to the receiver, and is not asked again during its
// backoff.
func TestOAuth2Tokens(t *testing.T) {
	ts := newTokenServer(t, 60)
	var refuse atomic.Value // a token the receiver refuses
	refuse.Store("")
	var seen sync.Map // Authorization values the receiver got
	var received atomic.Int64
	rcv := newReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		auth := r.Header.Get("Authorization")
		seen.Store(auth, true)
		if !strings.HasPrefix(auth, "Bearer tok-") || auth == "Bearer "+refuse.Load().(string) {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}), false)
	// One client trusts both test servers' certificates.
	pool := rcv.tlsConfig()
	pool.RootCAs.AddCert(ts.Certificate())
	c := devClient(t, nil, attempt.ClientConfig{TLSConfig: pool})

	var clock atomic.Int64 // seconds after testNow
	now := func() time.Time { return testNow.Add(time.Duration(clock.Load()) * time.Second) }
	do := func() attempt.Outcome {
		req := testRequest(rcv.URL)
		req.OAuth2, req.TokenKey, req.Now = ts.grant(), "ep_1/1", now
		return c.Do(context.Background(), req)
	}

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if o := do(); o.Status != http.StatusOK {
				t.Errorf("attempt: status %d, %s %s", o.Status, o.ErrorClass, o.Error)
			}
		})
	}
	wg.Wait()
	if n := ts.requests.Load(); n != 1 {
		t.Fatalf("20 concurrent attempts made %d token requests, want 1", n)
	}
	ts.mu.Lock()
	if f := ts.form[0]; f != "hooks:write b|https://rcv" {
		t.Errorf("token request scope|audience = %q", f)
	}
	ts.mu.Unlock()

	// 60 s tokens are replaced 15 s early.
	clock.Store(44)
	do()
	if n := ts.requests.Load(); n != 1 {
		t.Fatalf("a token 16 s from its expiry was replaced (%d requests)", n)
	}
	clock.Store(46)
	do()
	if n := ts.requests.Load(); n != 2 {
		t.Fatalf("a token 14 s from its expiry was not replaced (%d requests)", n)
	}

	// The receiver refuses the cached token: one new token, one resend.
	refuse.Store("tok-2")
	before := received.Load()
	if o := do(); o.Status != http.StatusOK {
		t.Fatalf("after a refused cached token: status %d, %s", o.Status, o.Error)
	}
	if n, r := ts.requests.Load(), received.Load()-before; n != 3 || r != 2 {
		t.Fatalf("after a refused cached token: %d token requests, %d requests to the receiver; want 3 and 2", n, r)
	}

	// The token endpoint fails: the attempt fails before the receiver,
	// and the next attempts within the backoff do not ask it again.
	ts.down.Store(true)
	clock.Store(200)
	before = received.Load()
	for range 3 {
		o := do()
		if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TOKEN || o.Status != 0 || !strings.Contains(o.Error, "token endpoint") {
			t.Fatalf("with the token endpoint down: %v %q (status %d), want ERROR_CLASS_TOKEN", o.ErrorClass, o.Error, o.Status)
		}
		if _, ok := o.Class.(attempt.Retryable); !ok {
			t.Fatalf("a token failure is %v, want retryable", o.Class)
		}
	}
	if n, r := ts.requests.Load(), received.Load()-before; n != 4 || r != 0 {
		t.Fatalf("3 attempts with the token endpoint down: %d token requests (want 4: one, then the backoff), %d requests to the receiver", n, r)
	}
	ts.down.Store(false)
	clock.Store(202) // past the 1 s backoff
	if o := do(); o.Status != http.StatusOK {
		t.Fatalf("after the token endpoint came back: %d %s", o.Status, o.Error)
	}
	seen.Range(func(k, _ any) bool {
		if a := k.(string); !strings.HasPrefix(a, "Bearer tok-") {
			t.Errorf("the receiver got Authorization %q", a)
		}
		return true
	})
}

// TestOAuth2TokenURLPolicy: a token URL the egress policy refuses is
// never requested.
func TestOAuth2TokenURLPolicy(t *testing.T) {
	ts := newTokenServer(t, 60)
	rcv := newReceiver(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), false)
	c := attempt.NewClient(attempt.ClientConfig{Policy: &attempt.Policy{}, TLSConfig: rcv.tlsConfig()})
	req := testRequest("https://hooks.example.com/in")
	req.OAuth2, req.TokenKey = ts.grant(), "ep_1/1"
	o := c.Do(context.Background(), req)
	if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TOKEN || ts.requests.Load() != 0 {
		t.Fatalf("a loopback token URL under the production policy: %v %q, %d token requests", o.ErrorClass, o.Error, ts.requests.Load())
	}
}
