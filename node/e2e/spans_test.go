package e2e_test

import (
	"encoding/hex"
	"net/http"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/tracing/otlp"
	"github.com/hookline/hookline/tracing/otlp/otlptest"
)

// TestSpansExported: a node with an OTLP exporter exports the publish of
// an event given a traceparent as a span in the producer's trace, and its
// attempt as a span with exactly the ids of the traceparent the receiver
// got and the lineage records.
func TestSpansExported(t *testing.T) {
	const producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	col := otlptest.New(t)
	exp, err := otlp.New(t.Context(), otlp.Config{Endpoint: col.URL(), Instance: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	n := startE2E(t, node.Config{Spans: exp})
	rc := newHookReceiver(t, nil)
	c := n.tenant(t, "acme", nil)
	c.endpoint(t, rc, "ep", []string{"invoice.paid"}, nil, answer(http.StatusOK))
	pub, err := c.events.Publish(c.ctx(), &controlv1.PublishRequest{EventId: "inv_1", Type: "invoice.paid", Payload: []byte(`{}`), Traceparent: producer})
	if err != nil {
		t.Fatal(err)
	}
	d := c.waitDelivery(t, pub.GetDeliveries()[0].GetDeliveryId(), "delivered", hasStatus("succeeded"))
	tp := d.GetAttempts()[0].GetTrace().GetTraceparent()
	if got := rc.receipts(d.GetDeliveryId()); len(got) != 1 || got[0].traceparent != tp {
		t.Fatalf("the receiver got %v; the lineage says %s", got, tp)
	}
	// Shutdown flushes what is queued.
	if err := exp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	kinds := map[tracepb.Span_SpanKind]*tracepb.Span{}
	for _, s := range spans {
		kinds[s.GetKind()] = s
	}
	a, p := kinds[tracepb.Span_SPAN_KIND_CLIENT], kinds[tracepb.Span_SPAN_KIND_SERVER]
	if a == nil || p == nil || len(spans) != 2 {
		t.Fatalf("spans %v; want the attempt (CLIENT) and the publish (SERVER)", spans)
	}
	if got := "00-" + hex.EncodeToString(a.GetTraceId()) + "-" + hex.EncodeToString(a.GetSpanId()) + "-01"; got != tp ||
		hex.EncodeToString(a.GetParentSpanId()) != "b7ad6b7169203331" {
		t.Errorf("attempt span %s (parent %x); want %s, child of the producer's span", got, a.GetParentSpanId(), tp)
	}
	if hex.EncodeToString(p.GetTraceId()) != "0af7651916cd43dd8448eb211c80319c" || hex.EncodeToString(p.GetParentSpanId()) != "b7ad6b7169203331" {
		t.Errorf("publish span %v; want a child of the producer's span", p)
	}
}
