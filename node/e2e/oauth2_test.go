package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// issuer is a loopback OAuth2 token endpoint issuing tokens valid for
// lifetime, and a receiver that accepts only its unexpired tokens.
type issuer struct {
	lifetime    time.Duration
	down        atomic.Bool
	downRefused atomic.Int64 // token requests refused while down

	mu         sync.Mutex // guards the fields below
	issued     map[string]time.Time
	lastIssued time.Time
	requests   int
	received   map[string]int // webhook-id → accepted requests
	refused    map[string]int // why → count
}

func (is *issuer) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if is.down.Load() {
		is.downRefused.Add(1)
		http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	if !ok || id != "hookline" || secret != "cs-e2e" || r.FormValue("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	is.mu.Lock()
	is.requests++
	tok := fmt.Sprintf("tok-%d", is.requests)
	is.issued[tok] = time.Now()
	is.lastIssued = is.issued[tok]
	is.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d}`, tok, int(is.lifetime.Seconds()))
}

func (is *issuer) receive(wh *standardwebhooks.Webhook) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		is.mu.Lock()
		defer is.mu.Unlock()
		at, ok := is.issued[tok]
		switch {
		case !ok:
			is.refused["a token the issuer never issued"]++
			w.WriteHeader(http.StatusUnauthorized)
		case time.Since(at) > is.lifetime:
			is.refused["an expired token"]++
			w.WriteHeader(http.StatusUnauthorized)
		case wh.Verify(body, r.Header) != nil:
			is.refused["a bad signature"]++
			w.WriteHeader(http.StatusBadRequest)
		default:
			is.received[r.Header.Get("webhook-id")]++
		}
	}
}

// TestOAuth2EndToEnd delivers 1,000 events through a node to a receiver
// that demands a bearer token from a loopback token endpoint issuing 2 s
// tokens: every delivery succeeds, the receiver sees only tokens the
// endpoint issued, and the token endpoint is asked about once per token
// lifetime, not once per delivery. Then the token endpoint is down: the
// deliveries published once every token has expired wait, and succeed
// once it is back.
func TestOAuth2EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("delivers 1,100 webhooks and waits out an outage of the token endpoint")
	}
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 500 * time.Millisecond, Cap: 2 * time.Second, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)
	is := &issuer{lifetime: 2 * time.Second, issued: map[string]time.Time{}, received: map[string]int{}, refused: map[string]int{}}
	tokens := httptest.NewServer(http.HandlerFunc(is.token))
	t.Cleanup(tokens.Close)
	var wh atomic.Pointer[standardwebhooks.Webhook]
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { is.receive(wh.Load())(w, r) }))
	t.Cleanup(rcv.Close)

	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_oauth", Settings: &controlv1.EndpointSettings{
		Url: rcv.URL + "/in", EventTypes: []string{"order.paid"}, RatePerSecond: 1000, Burst: 100, MaxInFlight: 20,
		Auth: &controlv1.EndpointAuth{Oauth2: &controlv1.OAuth2Auth{TokenUrl: tokens.URL + "/token", ClientId: "hookline", ClientSecret: "cs-e2e", Scopes: []string{"webhooks"}}},
	}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	w, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}
	wh.Store(w)

	publish := func(from, count int) []string { return c.publishBatch(t, "o", from, count, "order.paid") }
	delivered := func(ids []string) func() bool {
		return func() bool {
			is.mu.Lock()
			defer is.mu.Unlock()
			for _, id := range ids {
				if is.received[id] == 0 {
					return false
				}
			}
			return true
		}
	}

	start := time.Now()
	var first []string
	for i := 0; i < 1000; i += 100 {
		first = append(first, publish(i, 100)...)
	}
	eventually(t, 60*time.Second, "1,000 deliveries with tokens", delivered(first))
	elapsed := time.Since(start)
	is.mu.Lock()
	requests := is.requests
	is.mu.Unlock()
	// A 2 s token is replaced 0.5 s early, so about one request per 1.5 s;
	// a token the receiver found expired in flight costs one more.
	if limit := int(elapsed/(1500*time.Millisecond)) + 3; requests < 1 || requests > 2*limit {
		t.Errorf("1,000 deliveries in %v asked the token endpoint %d times; want about one per token lifetime (at most %d)", elapsed.Round(time.Millisecond), requests, 2*limit)
	}
	t.Logf("1,000 deliveries in %v, %d token requests", elapsed.Round(time.Millisecond), requests)

	// The outage. The events are published once the last token issued
	// has expired, so that none can be delivered until the token endpoint
	// is back; it stays down until the node has been refused a token and
	// one of them has had an attempt fail for want of one (the endpoint's
	// circuit may hold the others back).
	is.down.Store(true)
	eventually(t, 2*is.lifetime+time.Second, "the last token issued expired", func() bool {
		is.mu.Lock()
		defer is.mu.Unlock()
		return time.Since(is.lastIssued) > is.lifetime
	})
	during := publish(1000, 100)
	eventually(t, 60*time.Second, "an attempt failed for want of a token", func() bool {
		if anyDelivered(is, during) {
			t.Fatal("a delivery succeeded while the token endpoint was down and every token had expired")
		}
		for _, id := range during {
			d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: id})
			if err == nil && d.GetStatus() == "pending" && len(d.GetAttempts()) > 0 &&
				d.GetAttempts()[0].GetErrorClass() == hooklinev1.ErrorClass_ERROR_CLASS_TOKEN {
				return true
			}
		}
		return false
	})
	if is.downRefused.Load() == 0 {
		t.Fatal("the node never asked the token endpoint while it was down")
	}
	is.down.Store(false)
	eventually(t, 60*time.Second, "the deliveries held by the outage", delivered(during))

	is.mu.Lock()
	defer is.mu.Unlock()
	if len(is.refused) > 0 {
		t.Logf("the receiver refused, and the node sent again: %v", is.refused)
	}
	if is.refused["a token the issuer never issued"] > 0 || is.refused["a bad signature"] > 0 {
		t.Errorf("the receiver got requests without a token the issuer issued, or badly signed: %v", is.refused)
	}
}

// anyDelivered reports whether the receiver accepted one of ids.
func anyDelivered(is *issuer, ids []string) bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, id := range ids {
		if is.received[id] > 0 {
			return true
		}
	}
	return false
}
