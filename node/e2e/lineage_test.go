package e2e_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/tracing"
)

// restPost calls POST path on the node's REST listener with token, the
// JSON of body and the extra headers, and decodes the JSON answer into
// out; it fails the test unless 200.
func (n *e2eNode) restPost(t *testing.T, token, path string, body any, headers map[string]string, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+n.srv.HTTPAddr()+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, got)
	}
	if err := json.Unmarshal(got, out); err != nil {
		t.Fatalf("POST %s: %v in %s", path, err, got)
	}
}

// TestAttemptLineageEndToEnd runs one node on an injected clock and
// follows one delivery, published over REST with the producer's
// traceparent, through a first attempt held by the endpoint's rate limit
// and answered 503 with a Retry-After of 2 h (capped at 1 h), an automatic
// retry answered 500 (a backoff drawn), a rotation of the secret, a second
// retry that succeeds signed by both secrets, and a manual replay by a
// named API key; a second delivery fails for good and is replayed by a
// bulk recovery. The delivery's lineage (gRPC and REST) names each of
// these; every attempt carried a traceparent of its own, a child of the
// producer's span, exactly as the receiver saw it; the body digests match
// the bytes the receiver got; no secret or signature is shown.
func TestAttemptLineageEndToEnd(t *testing.T) {
	const (
		producer   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		traceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentSpan = "00f067aa0ba902b7"
		state      = "rojo=00f067aa0ba902b7"
		okBody     = `{"ok":true}`
	)
	t0 := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	clk := &clock{now: t0}
	schedule := attempt.Schedule{Base: 100 * time.Second, Cap: 8 * time.Hour, MaxAttempts: 10}
	rc := newHookReceiver(t, clk.Now)
	n := startE2E(t, node.Config{Now: clk.Now, SweepInterval: e2eSweep, StaleAfter: e2eStale, Schedule: schedule})
	c := n.tenant(t, "acme", nil)
	adm := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+e2eAdmin)
	ops, err := controlv1.NewTenantServiceClient(n.cc).IssueApiKey(adm, &controlv1.IssueApiKeyRequest{TenantId: "acme", Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}

	c.endpoint(t, rc, "ep_lin", []string{"invoice.paid"}, func(s *controlv1.EndpointSettings) { s.RatePerSecond, s.Burst = 1, 1 },
		func(w http.ResponseWriter, r *http.Request, k int) {
			switch ev := r.Header.Get("webhook-event-id"); {
			case ev == "inv_lin" && k == 1:
				w.Header().Set("Retry-After", "7200")
				w.WriteHeader(http.StatusServiceUnavailable)
			case ev == "inv_lin" && k == 2:
				w.WriteHeader(http.StatusInternalServerError)
			case ev == "inv_bad" && k == 1:
				w.WriteHeader(http.StatusBadRequest)
			default:
				_, _ = w.Write([]byte(okBody))
			}
		})
	created := c.getEndpoint(t, "ep_lin")
	var secrets []string

	// A first delivery takes the bucket's one token: the clock stands
	// still, so the next one waits for the rate limit.
	warm := c.publish(t, "inv_warm", "invoice.paid")[0]
	c.waitDelivery(t, warm, "the warm-up delivered", hasStatus("succeeded"))

	payload := []byte(`{"invoice":"inv_lin","amount":42}`)
	var pub struct {
		TraceID    string `json:"trace_id"`
		Deliveries []struct {
			DeliveryID string `json:"delivery_id"`
		} `json:"deliveries"`
	}
	n.restPost(t, c.key, "/v1/events", map[string]any{
		"event_id": "inv_lin", "type": "invoice.paid", "payload": base64.StdEncoding.EncodeToString(payload),
	}, map[string]string{"traceparent": producer, "tracestate": state}, &pub)
	if pub.TraceID != traceID || len(pub.Deliveries) != 1 {
		t.Fatalf("REST publish with a traceparent answered trace %q, %d deliveries; want the producer's trace %s, 1", pub.TraceID, len(pub.Deliveries), traceID)
	}
	id := pub.Deliveries[0].DeliveryID
	planned := clk.Now()

	// ticking is waitDelivery for an attempt held by the rate limit: the
	// bucket refills at 1/s of the injected clock, so it moves the clock
	// 100 ms at every poll until cond holds.
	ticking := func(cond func(*controlv1.Delivery) bool, id, what string) *controlv1.Delivery {
		t.Helper()
		return c.waitDelivery(t, id, what, func(d *controlv1.Delivery) bool {
			if cond(d) {
				return true
			}
			clk.Add(100 * time.Millisecond)
			return false
		})
	}
	var as []*hooklinev1.Attempt
	t.Run("first attempt: held by the rate limit, Retry-After capped", func(t *testing.T) {
		d := ticking(hasAttempts(1), id, "the first attempt")
		a := d.GetAttempts()[0]
		if tr := a.GetTrigger(); tr.GetKind() != hooklinev1.AttemptTrigger_KIND_SCHEDULED || !tr.GetDueAt().AsTime().Equal(planned) {
			t.Errorf("trigger %v; want SCHEDULED, due at the publish %v", tr, planned)
		}
		w := a.GetWaits()
		if w.GetRateLimitMs() < 1000 || w.GetRateLimitMs() > 5000 || w.GetTotalMs() != w.GetRateLimitMs()+w.GetSlotMs() ||
			w.GetTenantQuotaMs()+w.GetBreakerMs()+w.GetInFlightMs() != 0 {
			t.Errorf("waits %v; want at least 1 s (steps of 100 ms) on the rate limit (1/s, the token taken), nothing on quota, breaker, in-flight", w)
		}
		r := a.GetRetry()
		next := a.GetFinishedAt().AsTime().Add(time.Hour) // decided as of the answer
		if a.GetHttpStatus() != http.StatusServiceUnavailable || r.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_SCHEDULED ||
			r.GetRetryAfter() != hooklinev1.RetryDecision_RETRY_AFTER_CAPPED || r.GetRetryAfterMs() != 7_200_000 ||
			r.GetRetryAfterAppliedMs() != 3_600_000 || r.GetBackoffWindowMs() != 100_000 || !r.GetNextAttemptAt().AsTime().Equal(next) ||
			!d.GetNextAttemptAt().AsTime().Equal(next) {
			t.Fatalf("503 with Retry-After 7200: decision %v (next %v); want the Retry-After capped at 1 h, next at %v", r, d.GetNextAttemptAt(), next)
		}
		t.Logf("attempt 1: waited %v; decided %q", w, r.GetReason())
		advanceTo(clk, next.Add(pickUp))
	})

	t.Run("first retry: a backoff drawn", func(t *testing.T) {
		d := c.waitDelivery(t, id, "the first retry", hasAttempts(2))
		a := d.GetAttempts()[1]
		if tr := a.GetTrigger(); tr.GetKind() != hooklinev1.AttemptTrigger_KIND_RETRY || tr.GetRetry() != 1 ||
			!tr.GetDueAt().AsTime().Equal(d.GetAttempts()[0].GetRetry().GetNextAttemptAt().AsTime()) {
			t.Errorf("trigger %v; want automatic retry 1, due when attempt 1 said", tr)
		}
		r := a.GetRetry()
		finished := a.GetFinishedAt().AsTime()
		drawn := r.GetNextAttemptAt().AsTime().Sub(finished) - time.Duration(r.GetBackoffMs())*time.Millisecond
		if a.GetHttpStatus() != http.StatusInternalServerError || r.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_SCHEDULED ||
			r.GetRetryAfter() != hooklinev1.RetryDecision_RETRY_AFTER_NONE || r.GetBackoffWindowMs() != 200_000 ||
			r.GetBackoffMs() < 0 || r.GetBackoffMs() >= 200_000 || drawn < 0 || drawn >= time.Millisecond {
			t.Fatalf("500: decision %v; want a backoff drawn from [0, 200 s) setting the next attempt", r)
		}
		t.Logf("attempt 2: decided %q", r.GetReason())
		// The secret rotates before the second retry: both secrets sign it.
		rot, err := c.endpoints.RotateSecret(c.ctx(), &controlv1.RotateSecretRequest{EndpointId: created.GetEndpointId(), OverlapSeconds: 24 * 3600})
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, rot.GetSecret())
		advanceTo(clk, r.GetNextAttemptAt().AsTime().Add(pickUp))
	})

	t.Run("second retry succeeds, signed by both secrets", func(t *testing.T) {
		d := c.waitDelivery(t, id, "the second retry", hasStatus("succeeded"))
		a := d.GetAttempts()[2]
		if tr := a.GetTrigger(); tr.GetKind() != hooklinev1.AttemptTrigger_KIND_RETRY || tr.GetRetry() != 2 {
			t.Errorf("trigger %v; want automatic retry 2", tr)
		}
		sum := sha256.Sum256([]byte(okBody))
		if a.GetHttpStatus() != http.StatusOK || a.GetRetry() != nil || !bytes.Equal(a.GetResponseSha256(), sum[:]) ||
			a.GetResponseBytes() != int64(len(okBody)) || a.GetResponseTruncated() || a.GetHeadersUs() > a.GetLatencyUs() {
			t.Errorf("attempt 3: %v; want 200 with the digest of %s, no retry decision", a, okBody)
		}
		for i, want := range [][]int32{{1}, {1}, {2, 1}} {
			if got := d.GetAttempts()[i].GetSecretVersions(); !slices.Equal(got, want) {
				t.Errorf("attempt %d signed by %v; want %v", i+1, got, want)
			}
		}
	})

	t.Run("a manual replay by a named key", func(t *testing.T) {
		call := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+ops.GetApiKey())
		if _, err := c.deliveries.ReplayDelivery(call, &controlv1.ReplayDeliveryRequest{DeliveryId: id}); err != nil {
			t.Fatal(err)
		}
		d := ticking(hasAttempts(4), id, "the replay")
		tr := d.GetAttempts()[3].GetTrigger()
		if tr.GetKind() != hooklinev1.AttemptTrigger_KIND_REPLAY || tr.GetRequestedBy().GetKind() != hooklinev1.Actor_KIND_API_KEY ||
			tr.GetRequestedBy().GetId() != ops.GetKeyId() || tr.GetRequestId() == "" {
			t.Errorf("trigger %v; want a replay by API key %s", tr, ops.GetKeyId())
		}
		as = d.GetAttempts()
	})

	t.Run("a bulk recovery names its job", func(t *testing.T) {
		bad := c.publish(t, "inv_bad", "invoice.paid")[0]
		ticking(hasStatus("failed"), bad, "the 400 ends it")
		rec, err := c.endpoints.RecoverEndpoint(c.ctx(), &controlv1.RecoverEndpointRequest{
			EndpointId: created.GetEndpointId(), Since: timestamppb.New(t0.Add(-time.Minute)),
		})
		if err != nil {
			t.Fatal(err)
		}
		d := ticking(hasAttempts(2), bad, "the recovery's attempt")
		tr := d.GetAttempts()[1].GetTrigger()
		if tr.GetKind() != hooklinev1.AttemptTrigger_KIND_RECOVERY || tr.GetRecoveryId() != rec.GetRecoveryId() || tr.GetRequestedBy().GetKind() != hooklinev1.Actor_KIND_API_KEY {
			t.Errorf("trigger %v; want recovery %s by the tenant's key", tr, rec.GetRecoveryId())
		}
		if r := d.GetAttempts()[0].GetRetry(); r.GetOutcome() != hooklinev1.RetryDecision_OUTCOME_PERMANENT {
			t.Errorf("the 400's decision %v; want PERMANENT", r)
		}
	})

	t.Run("each attempt a child span of the producer's, as the receiver saw it", func(t *testing.T) {
		got := rc.receipts(id)
		if len(got) != len(as) {
			t.Fatalf("the receiver got %d requests; the lineage has %d attempts", len(got), len(as))
		}
		sum := sha256.Sum256(payload)
		spans := map[string]bool{}
		for i, a := range as {
			tc, err := tracing.Parse(a.GetTrace().GetTraceparent())
			if err != nil || tc.TraceID.String() != traceID || a.GetTrace().GetParentSpanId() != parentSpan || tc.SpanID.String() == parentSpan {
				t.Errorf("attempt %d trace %v (%v); want a new span in trace %s, child of %s", i+1, a.GetTrace(), err, traceID, parentSpan)
			}
			spans[tc.SpanID.String()] = true
			if got[i].traceparent != a.GetTrace().GetTraceparent() || got[i].tracestate != state {
				t.Errorf("attempt %d: the receiver saw traceparent %q tracestate %q; the lineage says %q (and %q was given)",
					i+1, got[i].traceparent, got[i].tracestate, a.GetTrace().GetTraceparent(), state)
			}
			if !bytes.Equal(a.GetBodySha256(), sum[:]) || a.GetBodyBytes() != int64(len(payload)) || sha256.Sum256(got[i].body) != sum {
				t.Errorf("attempt %d body sha256 %x (%d B), the receiver's %x; want the payload's %x", i+1, a.GetBodySha256(), a.GetBodyBytes(), sha256.Sum256(got[i].body), sum)
			}
		}
		if len(spans) != len(as) {
			t.Errorf("%d span ids over %d attempts; want one each", len(spans), len(as))
		}
	})

	t.Run("over REST, nothing secret", func(t *testing.T) {
		r := n.restGet(t, c.key, "/v1/webhook-deliveries/"+id)
		raw, _ := json.Marshal(r)
		list, _ := r["attempts"].([]any)
		if len(list) != len(as) {
			t.Fatalf("REST: %d attempts; want %d", len(list), len(as))
		}
		first := list[0].(map[string]any)
		trigger, _ := first["trigger"].(map[string]any)
		retry, _ := first["retry"].(map[string]any)
		waits, _ := first["waits"].(map[string]any)
		trace, _ := first["trace"].(map[string]any)
		sum := sha256.Sum256(payload)
		if trigger["kind"] != "KIND_SCHEDULED" || retry["retry_after"] != "RETRY_AFTER_CAPPED" || retry["retry_after_applied_ms"] != "3600000" ||
			waits["rate_limit_ms"] == nil || trace["traceparent"] != as[0].GetTrace().GetTraceparent() || trace["parent_span_id"] != parentSpan ||
			first["body_sha256"] != base64.StdEncoding.EncodeToString(sum[:]) {
			t.Errorf("REST attempt 1: %v", first)
		}
		if tr, _ := list[3].(map[string]any)["trigger"].(map[string]any); tr["kind"] != "KIND_REPLAY" {
			t.Errorf("REST attempt 4 trigger %v; want KIND_REPLAY", tr)
		}
		view := string(raw) + as[0].String() + as[2].String() + as[3].String()
		for _, s := range append(secrets, c.key, ops.GetApiKey()) {
			if s != "" && strings.Contains(view, strings.TrimPrefix(s, "whsec_")) {
				t.Errorf("the lineage shows a secret or key (%.10s…)", s)
			}
		}
		for _, g := range rc.receipts(id) {
			for _, sig := range strings.Fields(g.signatures) {
				_, mac, _ := strings.Cut(sig, ",")
				if strings.Contains(view, mac) {
					t.Errorf("the lineage shows a signature sent")
				}
			}
		}
		if strings.Contains(view, "whsec_") {
			t.Error("the lineage shows a whsec_ secret")
		}
	})
	if p := rc.rejected(); len(p) > 0 {
		t.Errorf("requests that failed verification: %v", p)
	}
}
