// Package otlptest is an OTLP/HTTP trace collector on loopback for tests:
// it keeps what an exporter sends it, with the path and Authorization
// header of each request.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector receives OTLP/HTTP trace exports (protobuf) and keeps their
// spans. It is safe for concurrent use.
type Collector struct {
	srv   *httptest.Server
	mu    sync.Mutex // guards the fields below
	spans []*tracepb.Span
	paths []string
	auth  []string
}

// New starts a collector, closed when t ends.
func New(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.export))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *Collector) export(w http.ResponseWriter, r *http.Request) {
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
	c.paths = append(c.paths, r.URL.Path)
	c.auth = append(c.auth, r.Header.Get("Authorization"))
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// URL is the collector's base URL, an exporter's endpoint.
func (c *Collector) URL() string { return c.srv.URL }

// Spans returns the spans received so far.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// Requests returns the path and Authorization header of each export
// received so far.
func (c *Collector) Requests() (paths, auth []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...), append([]string(nil), c.auth...)
}
