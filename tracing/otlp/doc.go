// Package otlp exports Hookline's own spans to an OpenTelemetry collector
// over OTLP/HTTP, when an OTLP endpoint is configured (hookline serve
// --otlp-endpoint, HOOKLINE_OTLP_ENDPOINT). It is the only importer of the
// OpenTelemetry SDK: nothing else in Hookline depends on it, and a node
// without an endpoint never builds an [Exporter].
//
// # Where it sits
//
// The node (cluster) hands an [Exporter] to the endpoint grains and the
// control API. Each attempt becomes a CLIENT span once its outcome is
// durable ([Exporter.Attempted]), with exactly the trace id and span id of
// the traceparent the attempt sent and its lineage records (see the
// tracing package), so the receiver's own span, a child of that
// traceparent, hangs under it; its parent is the producer's span when the
// event was published with a traceparent. Each publish becomes a SERVER
// span ([Exporter.Published]) in the same trace. Spans of a producer trace
// that is not sampled are not exported.
//
// Spans are queued and sent in batches off the caller's goroutine; a full
// queue drops spans rather than slow delivery. Export errors go to the
// logger. The OTLP exporter also reads the standard OTEL_EXPORTER_OTLP_*
// variables for what Config does not set (headers, TLS certificates,
// compression).
package otlp
