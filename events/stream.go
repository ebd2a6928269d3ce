package events

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// Stream categories, the part of a stream name before the first '-'.
const (
	TenantCategory   = "tenant"
	EndpointCategory = "endpoint"
	EventCategory    = "event"
	DeliveryCategory = "delivery"
	// PortalCategory holds one stream per portal token (projections/portal).
	PortalCategory = "portal"
	// ReconcileCategory holds the repairs of reconcile runs.
	ReconcileCategory = "reconcile"
	// RecoveryCategory holds the recorded lists of window recoveries.
	RecoveryCategory = "recovery"
	// OrderingCategory holds one stream per endpoint ordered by key: the
	// checkpoints of its keys' sequences, which never expire.
	OrderingCategory = "ordering"
)

// OwnersStream is the cluster's partition table: PartitionsAssigned events,
// which say which member serves each delivery partition from where they
// stand in the log on (projections/owners applies them).
const OwnersStream = "partitions-owners"

// TenantStream names the stream of a tenant.
func TenantStream(tenantID string) string { return TenantCategory + "-" + tenantID }

// EndpointStream names the stream of an endpoint.
func EndpointStream(endpointID string) string { return EndpointCategory + "-" + endpointID }

// EventStream names the stream of one published event of a tenant.
func EventStream(tenantID, eventID string) string {
	return EventCategory + "-" + tenantID + "." + eventID
}

// DeliveryStream names the stream of one delivery.
func DeliveryStream(deliveryID string) string { return DeliveryCategory + "-" + deliveryID }

// ReconcileStream names the stream of one reconcile run's repairs.
func ReconcileStream(runID string) string { return ReconcileCategory + "-" + runID }

// RecoveryStream names the stream of one recovery's recorded list.
func RecoveryStream(recoveryID string) string { return RecoveryCategory + "-" + recoveryID }

// OrderingStream names the stream of an endpoint's ordering checkpoints.
func OrderingStream(endpointID string) string { return OrderingCategory + "-" + endpointID }

// Category returns the category of a stream name ("" when it has none).
func Category(stream string) string {
	c, _, ok := strings.Cut(stream, "-")
	if !ok {
		return ""
	}
	return c
}

// Expires reports whether retention may drop a stream once its last write is
// older than the cut-off: event, delivery and portal token streams expire
// (a token lives a day at most); tenant, endpoint and ordering streams are
// kept for as long as the tenant exists.
func Expires(stream string) bool {
	switch Category(stream) {
	case EventCategory, DeliveryCategory, PortalCategory:
		return true
	}
	return false
}

// DeliveryID names the delivery of one event to one endpoint. It is derived
// from (tenant, event id, endpoint id) alone, so it is the same across
// automatic retries, manual replays and any re-run of fan-out; receivers get
// it as webhook-id and dedupe on it.
func DeliveryID(tenantID, eventID, endpointID string) string {
	h := sha256.Sum256([]byte(tenantID + "\x00" + eventID + "\x00" + endpointID))
	return "dlv_" + idEncoding.EncodeToString(h[:16])
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
