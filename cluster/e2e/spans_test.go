package e2e_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/tracing/otlp"
)

// spanCollector is an OTLP/HTTP collector on loopback that keeps the
// spans exported to it.
type spanCollector struct {
	srv   *httptest.Server
	mu    sync.Mutex // guards spans
	spans []*tracepb.Span
}

func newSpanCollector(t *testing.T) *spanCollector {
	t.Helper()
	c := &spanCollector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.mu.Unlock()
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// TestSpansExported: a node with an OTLP exporter exports the publish of
// an event given a traceparent as a span in the producer's trace, and its
// attempt as a span with exactly the ids of the traceparent the receiver
// got and the lineage records.
func TestSpansExported(t *testing.T) {
	const producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	col := newSpanCollector(t)
	exp, err := otlp.New(t.Context(), otlp.Config{Endpoint: col.srv.URL, Instance: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	n := startE2E(t, cluster.ServerConfig{Spans: exp})
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
	col.mu.Lock()
	defer col.mu.Unlock()
	kinds := map[tracepb.Span_SpanKind]*tracepb.Span{}
	for _, s := range col.spans {
		kinds[s.GetKind()] = s
	}
	a, p := kinds[tracepb.Span_SPAN_KIND_CLIENT], kinds[tracepb.Span_SPAN_KIND_SERVER]
	if a == nil || p == nil || len(col.spans) != 2 {
		t.Fatalf("spans %v; want the attempt (CLIENT) and the publish (SERVER)", col.spans)
	}
	if got := "00-" + hex.EncodeToString(a.GetTraceId()) + "-" + hex.EncodeToString(a.GetSpanId()) + "-01"; got != tp ||
		hex.EncodeToString(a.GetParentSpanId()) != "b7ad6b7169203331" {
		t.Errorf("attempt span %s (parent %x); want %s, child of the producer's span", got, a.GetParentSpanId(), tp)
	}
	if hex.EncodeToString(p.GetTraceId()) != "0af7651916cd43dd8448eb211c80319c" || hex.EncodeToString(p.GetParentSpanId()) != "b7ad6b7169203331" {
		t.Errorf("publish span %v; want a child of the producer's span", p)
	}
}
