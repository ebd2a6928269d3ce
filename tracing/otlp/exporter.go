package otlp

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/tracing"
)

// Defaults of the zero Config.
const (
	DefaultService   = "hookline"
	DefaultTimeout   = 10 * time.Second
	DefaultQueueSize = 16384
)

// ErrConfig says a Config cannot be used; the error that wraps it says
// why.
var ErrConfig = errors.New("otlp: invalid config")

// Config configures an [Exporter]. Endpoint is required; every other
// field has a documented default.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP URL, http or https, e.g.
	// http://collector:4318; /v1/traces is added when it has no path.
	Endpoint string
	// Headers are sent with every export (an authorization token, say);
	// nil means those of OTEL_EXPORTER_OTLP_HEADERS, if any. Never logged.
	Headers map[string]string
	// Service is the service.name of the spans' resource; empty means
	// DefaultService.
	Service string
	// Instance is the service.instance.id (the node); empty means none.
	Instance string
	// Timeout bounds one export; 0 means DefaultTimeout.
	Timeout time.Duration
	// QueueSize bounds the spans waiting to be sent; more are dropped. 0
	// means DefaultQueueSize.
	QueueSize int
	// Logger receives export errors; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.Endpoint == "" {
		return fmt.Errorf("%w: an endpoint is required", ErrConfig)
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%w: endpoint %q: give an http or https URL with a host and no query, e.g. http://collector:4318", ErrConfig, redact(c.Endpoint))
	}
	if c.Timeout < 0 || c.QueueSize < 0 {
		return fmt.Errorf("%w: timeout and queue size must not be negative", ErrConfig)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.Service = cmp.Or(c.Service, DefaultService)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.QueueSize = cmp.Or(c.QueueSize, DefaultQueueSize)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// tracesURL is the endpoint with /v1/traces when it has no path.
func (c Config) tracesURL() string {
	u, _ := url.Parse(c.Endpoint)
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String()
}

// Exporter sends spans to a collector. Its methods are safe for
// concurrent use and do not block: spans are queued and sent in batches.
// Build it with [New]; Shutdown flushes and stops it.
type Exporter struct {
	provider *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
}

// New returns an Exporter for cfg. It does not connect: a collector that
// is down shows as export errors in the log, and spans are lost, never
// deliveries.
func New(ctx context.Context, cfg Config) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.tracesURL()), otlptracehttp.WithTimeout(cfg.Timeout)}
	if cfg.Headers != nil {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.Service)}
	if cfg.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.Instance))
	}
	logger := cfg.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("cannot export spans", slog.String("endpoint", redact(cfg.Endpoint)), slog.Any("error", err))
	}))
	p := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(cfg.QueueSize), sdktrace.WithExportTimeout(cfg.Timeout)),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithIDGenerator(ids{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
	return &Exporter{provider: p, tracer: p.Tracer("github.com/hookline/hookline")}, nil
}

// Shutdown sends the spans still queued and stops the exporter, within
// ctx.
func (e *Exporter) Shutdown(ctx context.Context) error {
	if err := e.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("otlp shutdown: %w", err)
	}
	return nil
}

// Attempted exports an attempt, as its outcome event records it, as a
// CLIENT span with the ids of its traceparent, from its start to its end.
// An attempt without a trace, or of a trace that is not sampled, is not
// exported.
func (e *Exporter) Attempted(a *hooklinev1.Attempt) {
	c, err := tracing.Parse(a.GetTrace().GetTraceparent())
	if err != nil || !c.Sampled() {
		return
	}
	ctx := withParent(context.Background(), c, a.GetTrace().GetParentSpanId())
	ctx = context.WithValue(ctx, spanKey{}, c.SpanID)
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", "POST"),
		attribute.String("hookline.tenant_id", a.GetTenantId()),
		attribute.String("hookline.endpoint_id", a.GetEndpointId()),
		attribute.String("hookline.delivery_id", a.GetDeliveryId()),
		attribute.String("hookline.event_id", a.GetEventId()),
		attribute.String("hookline.event_type", a.GetEventType()),
		attribute.Int("hookline.attempt", int(a.GetNumber())),
		attribute.String("hookline.trigger", trigger(a.GetTrigger())),
	}
	if s := a.GetHttpStatus(); s != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", int(s)))
	}
	_, span := e.tracer.Start(ctx, "webhook "+a.GetEventType(), oteltrace.WithSpanKind(oteltrace.SpanKindClient),
		oteltrace.WithTimestamp(a.GetStartedAt().AsTime()), oteltrace.WithAttributes(attrs...))
	if a.GetErrorClass() != hooklinev1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		span.SetAttributes(attribute.String("error.type", a.GetErrorClass().String()))
		span.SetStatus(codes.Error, a.GetError())
	}
	span.End(oteltrace.WithTimestamp(a.GetFinishedAt().AsTime()))
}

// Published exports a publish as a SERVER span from start to end: a child
// of the producer's span when the event carries a traceparent (unless it
// is not sampled), else a root span of the event's own trace.
func (e *Exporter) Published(ev *hooklinev1.EventPublished, start, end time.Time) {
	ctx := context.Background()
	if p, err := tracing.Parse(ev.GetTraceparent()); err == nil {
		if !p.Sampled() {
			return
		}
		ctx = oteltrace.ContextWithRemoteSpanContext(ctx, spanContext(p.TraceID, p.SpanID, p.Flags))
	} else {
		ctx = context.WithValue(ctx, traceKey{}, tracing.EventTraceID(ev.GetTenantId(), ev.GetEventId()))
	}
	_, span := e.tracer.Start(ctx, "publish "+ev.GetEventType(), oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithTimestamp(start), oteltrace.WithAttributes(
			attribute.String("hookline.tenant_id", ev.GetTenantId()),
			attribute.String("hookline.event_id", ev.GetEventId()),
			attribute.String("hookline.event_type", ev.GetEventType()),
		))
	span.End(oteltrace.WithTimestamp(end))
}

// withParent puts the attempt's parent in ctx: the producer's span (a
// remote parent, parent is its hex id), or, without one, the attempt's
// trace id for ids to start a root span in.
func withParent(ctx context.Context, c tracing.Context, parent string) context.Context {
	var p tracing.SpanID
	if b, err := hex.DecodeString(parent); err == nil && len(b) == len(p) {
		copy(p[:], b)
		return oteltrace.ContextWithRemoteSpanContext(ctx, spanContext(c.TraceID, p, c.Flags))
	}
	return context.WithValue(ctx, traceKey{}, c.TraceID)
}

func spanContext(t tracing.TraceID, s tracing.SpanID, flags byte) oteltrace.SpanContext {
	return oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: oteltrace.TraceID(t), SpanID: oteltrace.SpanID(s), TraceFlags: oteltrace.TraceFlags(flags), Remote: true,
	})
}

// The ids a span must have, in the context of its Start.
type (
	traceKey struct{}
	spanKey  struct{}
)

// ids gives a span the ids its context names: the attempt's span id
// (recorded in its lineage and sent to the receiver), and the trace id of
// a root span; others get new random ones.
type ids struct{}

func (ids) NewIDs(ctx context.Context) (oteltrace.TraceID, oteltrace.SpanID) {
	t, ok := ctx.Value(traceKey{}).(tracing.TraceID)
	if !ok {
		t = tracing.NewTraceID()
	}
	return oteltrace.TraceID(t), ids{}.NewSpanID(ctx, oteltrace.TraceID(t))
}

func (ids) NewSpanID(ctx context.Context, _ oteltrace.TraceID) oteltrace.SpanID {
	if s, ok := ctx.Value(spanKey{}).(tracing.SpanID); ok {
		return oteltrace.SpanID(s)
	}
	return oteltrace.SpanID(tracing.NewSpanID())
}

func trigger(t *hooklinev1.AttemptTrigger) string {
	switch t.GetKind() {
	case hooklinev1.AttemptTrigger_KIND_SCHEDULED:
		return "scheduled"
	case hooklinev1.AttemptTrigger_KIND_RETRY:
		return fmt.Sprintf("retry %d", t.GetRetry())
	case hooklinev1.AttemptTrigger_KIND_REPLAY:
		return "replay"
	case hooklinev1.AttemptTrigger_KIND_RECOVERY:
		return "recovery " + t.GetRecoveryId()
	}
	return "unknown"
}

// redact hides credentials and the query of a URL in messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
