package otlp_test

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/tracing"
	"github.com/hookline/hookline/tracing/otlp"
	"github.com/hookline/hookline/tracing/otlp/otlptest"
)

// attr returns the value of the span attribute key ("" without it).
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			if v := kv.GetValue().GetStringValue(); v != "" {
				return v
			}
			return kv.GetValue().String()
		}
	}
	return ""
}

func TestExporter(t *testing.T) {
	col := otlptest.New(t)
	exp, err := otlp.New(t.Context(), otlp.Config{Endpoint: col.URL(), Headers: map[string]string{"Authorization": "Bearer col"}, Instance: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	child, _, _ := tracing.ForAttempt(producer, "acme", "inv_1", false)
	own, _, _ := tracing.ForAttempt("", "acme", "inv_2", true)
	dropped, _, _ := tracing.ForAttempt("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "acme", "inv_3", true)
	attempt := func(c tracing.Context, parent, event string) *hooklinev1.Attempt {
		return &hooklinev1.Attempt{
			TenantId: "acme", EndpointId: "ep_1", DeliveryId: "dlv_" + event, EventId: event, EventType: "invoice.paid", Number: 2,
			StartedAt: timestamppb.New(start), FinishedAt: timestamppb.New(start.Add(120 * time.Millisecond)), HttpStatus: 503,
			ErrorClass: hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS, Error: "HTTP 503 Service Unavailable",
			Trigger: &hooklinev1.AttemptTrigger{Kind: hooklinev1.AttemptTrigger_KIND_RETRY, Retry: 1},
			Trace:   &hooklinev1.AttemptTrace{Traceparent: c.String(), ParentSpanId: parent},
		}
	}
	exp.Attempted(attempt(child, "00f067aa0ba902b7", "inv_1"))
	exp.Attempted(attempt(own, "", "inv_2"))
	exp.Attempted(attempt(dropped, "00f067aa0ba902b7", "inv_3")) // the producer's trace is not sampled
	exp.Attempted(&hooklinev1.Attempt{EventId: "inv_4"})         // no trace (no request was sent)
	exp.Published(&hooklinev1.EventPublished{TenantId: "acme", EventId: "inv_1", EventType: "invoice.paid", Traceparent: producer},
		start.Add(-time.Second), start.Add(-time.Second+3*time.Millisecond))
	if err := exp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	spans := col.Spans()
	if len(spans) != 3 {
		t.Fatalf("%d spans exported; want 3 (two attempts, one publish): %v", len(spans), spans)
	}
	byEvent := map[string]*tracepb.Span{}
	for _, s := range spans {
		byEvent[attr(s, "hookline.event_id")+" "+s.GetKind().String()] = s
	}
	hexOf := func(b []byte) string { return hex.EncodeToString(b) }
	a := byEvent["inv_1 SPAN_KIND_CLIENT"]
	if hexOf(a.GetTraceId()) != child.TraceID.String() || hexOf(a.GetSpanId()) != child.SpanID.String() || hexOf(a.GetParentSpanId()) != "00f067aa0ba902b7" {
		t.Errorf("attempt span ids %x/%x parent %x; want the traceparent sent %s, child of 00f067aa0ba902b7",
			a.GetTraceId(), a.GetSpanId(), a.GetParentSpanId(), child)
	}
	if a.GetStartTimeUnixNano() != uint64(start.UnixNano()) || a.GetEndTimeUnixNano() != uint64(start.Add(120*time.Millisecond).UnixNano()) ||
		a.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR || attr(a, "hookline.trigger") != "retry 1" || attr(a, "hookline.delivery_id") != "dlv_inv_1" {
		t.Errorf("attempt span %v; want the attempt's times, an error status and its lineage", a)
	}
	b := byEvent["inv_2 SPAN_KIND_CLIENT"]
	if hexOf(b.GetTraceId()) != tracing.EventTraceID("acme", "inv_2").String() || hexOf(b.GetSpanId()) != own.SpanID.String() || len(b.GetParentSpanId()) != 0 {
		t.Errorf("own-trace attempt span %x/%x parent %x; want a root span of the event's trace", b.GetTraceId(), b.GetSpanId(), b.GetParentSpanId())
	}
	p := byEvent["inv_1 SPAN_KIND_SERVER"]
	if hexOf(p.GetTraceId()) != "4bf92f3577b34da6a3ce929d0e0e4736" || hexOf(p.GetParentSpanId()) != "00f067aa0ba902b7" || p.GetName() != "publish invoice.paid" {
		t.Errorf("publish span %v; want a child of the producer's span", p)
	}
	paths, auth := col.Requests()
	if len(paths) == 0 || paths[0] != "/v1/traces" || auth[0] != "Bearer col" {
		t.Errorf("exported to %v with authorization %q; want /v1/traces with the configured header", paths, auth)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, bad := range []string{"", "collector:4318", "ftp://collector", "http://", "http://collector:4318/v1/traces?token=x", "http://user:pw@collector"} {
		if err := (otlp.Config{Endpoint: bad}).Validate(); !errors.Is(err, otlp.ErrConfig) {
			t.Errorf("endpoint %q: %v; want ErrConfig", bad, err)
		}
	}
	if err := (otlp.Config{Endpoint: "https://collector.example:4318"}).Validate(); err != nil {
		t.Errorf("a good endpoint: %v", err)
	}
	if _, err := otlp.New(context.Background(), otlp.Config{Endpoint: "collector"}); !errors.Is(err, otlp.ErrConfig) {
		t.Errorf("New with a bad endpoint: %v; want ErrConfig", err)
	}
}
