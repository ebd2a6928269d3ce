package control

import (
	"context"
	"time"

	"google.golang.org/grpc/metadata"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/tracing"
)

// Spans exports a publish as a span of the event's trace, from start to
// end (*otlp.Exporter satisfies it); it must not block.
type Spans interface {
	Published(ev *hooklinev1.EventPublished, start, end time.Time)
}

// traceOf returns the producer's W3C trace context of a publish, as the
// event records it: the request's traceparent and tracestate, checked (an
// invalid one is refused, naming the field: nothing is written), or else
// the call's traceparent and tracestate (gRPC metadata, or the HTTP
// headers the REST gateway forwards), taken only when valid and ignored
// otherwise, as Trace Context asks of a receiver of the header. The
// traceparent is normalised to version 00.
func traceOf(ctx context.Context, req *controlv1.PublishRequest) (traceparent, tracestate string, err error) {
	if tp := req.GetTraceparent(); tp != "" {
		c, err := tracing.Parse(tp)
		if err != nil {
			return "", "", invalid("traceparent", "%v; give 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, or leave it empty", err)
		}
		if err := tracing.CheckState(req.GetTracestate()); err != nil {
			return "", "", invalid("tracestate", "%v", err)
		}
		return c.String(), req.GetTracestate(), nil
	}
	if req.GetTracestate() != "" {
		return "", "", invalid("tracestate", "is set without traceparent; give both or neither")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	tps := md.Get("traceparent")
	if len(tps) != 1 {
		return "", "", nil // none, or several: ignored
	}
	c, err := tracing.Parse(tps[0])
	if err != nil {
		return "", "", nil
	}
	if ts := md.Get("tracestate"); len(ts) == 1 && tracing.CheckState(ts[0]) == nil {
		tracestate = ts[0]
	}
	return c.String(), tracestate, nil
}

// traceID is the trace id (hex) that the attempts of an event carry: the
// producer's, or the event's own.
func traceID(ev *hooklinev1.EventPublished) string {
	if c, err := tracing.Parse(ev.GetTraceparent()); err == nil {
		return c.TraceID.String()
	}
	return tracing.EventTraceID(ev.GetTenantId(), ev.GetEventId()).String()
}
