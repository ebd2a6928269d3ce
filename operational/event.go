package operational

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Event is one operational event, ready to publish for its tenant. Every
// field derives from the log record that caused it, and from nothing else:
// emitting it again (after a crash, or from a partition's next owner)
// publishes the same event id with the same bytes, which the publish path
// answers as a duplicate.
type Event struct {
	TenantID string `json:"tenant_id"`
	// ID is the event id: "hl_" and the cause record's id.
	ID   string `json:"id"`
	Type string `json:"type"`
	// OccurredAt is when the cause happened (its event's time).
	OccurredAt time.Time `json:"occurred_at"`
	// Payload is the JSON body receivers get: {"type", "timestamp",
	// "data", "cause"}.
	Payload []byte `json:"payload"`
	// EndpointID is the endpoint the event is about: its own deliveries
	// are never about it (see the loop guard in the package doc).
	EndpointID string `json:"endpoint_id"`
	// Recorded is when the cause was recorded in the log.
	Recorded time.Time `json:"recorded"`
}

// IDPrefix starts the event id of every operational event.
const IDPrefix = "hl_"

// EventID is the event id of the operational event caused by the log
// record whose id is cause.
func EventID(cause uuid.UUID) string { return IDPrefix + cause.String() }

// envelope is the payload's shape, the one Standard Webhooks suggests.
type envelope struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
	Cause     cause  `json:"cause"`
}

// cause names the log record an event comes from, for audit.
type cause struct {
	Stream   string `json:"stream"`
	Revision uint64 `json:"revision"`
	Event    string `json:"event"`
}

type actor struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

type pausedData struct {
	EndpointID string `json:"endpoint_id"`
	Reason     string `json:"reason"`
	DeliveryID string `json:"delivery_id,omitempty"`
	PausedBy   *actor `json:"paused_by,omitempty"`
}

type circuitOpenedData struct {
	EndpointID          string `json:"endpoint_id"`
	ConsecutiveFailures int32  `json:"consecutive_failures"`
	LastErrorClass      string `json:"last_error_class,omitempty"`
	Until               string `json:"until,omitempty"`
	CoolDownMs          int64  `json:"cool_down_ms"`
}

type circuitClosedData struct {
	EndpointID string `json:"endpoint_id"`
}

type deliveryData struct {
	EndpointID string `json:"endpoint_id"`
	DeliveryID string `json:"delivery_id"`
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Attempts   int32  `json:"attempts"`
	HTTPStatus int32  `json:"http_status,omitempty"`
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
}

type recoveryData struct {
	EndpointID string `json:"endpoint_id"`
	RecoveryID string `json:"recovery_id"`
	Reason     string `json:"reason"`
	Found      int64  `json:"found"`
	Requested  int64  `json:"requested"`
}

type rotationStartedData struct {
	EndpointID        string `json:"endpoint_id"`
	Version           int32  `json:"version"`
	PreviousVersion   int32  `json:"previous_version,omitempty"`
	PreviousExpiresAt string `json:"previous_expires_at,omitempty"`
}

type rotationEndedData struct {
	EndpointID string `json:"endpoint_id"`
	Version    int32  `json:"version"`
	Reason     string `json:"reason"`
}

// Of returns the operational event that a log record causes, if any: the
// causes are EndpointPaused, CircuitOpened, CircuitClosed, a terminal
// AttemptFailed of an automatic attempt (DeliveryFailed, or
// AttemptsExhausted when its error allowed a retry), DeliveryExpired,
// RecoveryFinished, SecretRotated and SecretRetired. A failure of a
// delivery of an operational event causes none, nor does a manual attempt
// or the end of a deliveries of a deleted endpoint. Of does not know
// whether the endpoint is itself operational: the [Feed] checks that.
func Of(rec *events.Record, msg proto.Message) (Event, bool) {
	var (
		typ, tenant, endpoint string
		at                    *timestamppb.Timestamp
		data                  any
	)
	switch m := msg.(type) {
	case *hooklinev1.EndpointPaused:
		d := pausedData{EndpointID: m.GetEndpointId(), Reason: "requested"}
		if m.GetReason() == hooklinev1.EndpointPaused_REASON_GONE {
			d.Reason, d.DeliveryID = "gone", m.GetDeliveryId()
		} else if by := m.GetIssuedBy(); by != nil {
			d.PausedBy = &actor{Kind: enumWord(by.GetKind().String(), "KIND_"), ID: by.GetId()}
		}
		typ, tenant, endpoint, at, data = EndpointPaused, m.GetTenantId(), m.GetEndpointId(), m.GetAt(), d
	case *hooklinev1.CircuitOpened:
		d := circuitOpenedData{
			EndpointID: m.GetEndpointId(), ConsecutiveFailures: m.GetConsecutiveFailures(),
			LastErrorClass: errorClass(m.GetLastError()), CoolDownMs: m.GetCoolDownMs(),
		}
		if m.GetUntil() != nil {
			d.Until = stamp(m.GetUntil().AsTime())
		}
		typ, tenant, endpoint, at, data = CircuitOpened, m.GetTenantId(), m.GetEndpointId(), m.GetAt(), d
	case *hooklinev1.CircuitClosed:
		typ, tenant, endpoint, at, data = CircuitClosed, m.GetTenantId(), m.GetEndpointId(), m.GetAt(), circuitClosedData{EndpointID: m.GetEndpointId()}
	case *hooklinev1.AttemptFailed:
		a := m.GetAttempt()
		if m.GetNextAttemptAt() != nil || a.GetManual() || Reserved(a.GetEventType()) ||
			a.GetErrorClass() == hooklinev1.ErrorClass_ERROR_CLASS_ENDPOINT_GONE {
			return Event{}, false
		}
		d := deliveryData{
			EndpointID: a.GetEndpointId(), DeliveryID: a.GetDeliveryId(), EventID: a.GetEventId(), EventType: a.GetEventType(),
			Attempts: a.GetNumber(), HTTPStatus: a.GetHttpStatus(), ErrorClass: errorClass(a.GetErrorClass()), Error: a.GetError(),
		}
		typ = AttemptsExhausted
		if !m.GetRetryable() {
			typ, d.Reason = DeliveryFailed, "permanent"
			if a.GetErrorClass() == hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL && a.GetHttpStatus() == 0 {
				d.Reason = "event_gone"
				d.Attempts = a.GetNumber() - 1 // this one was not an attempt
			}
		}
		tenant, endpoint, at, data = a.GetTenantId(), a.GetEndpointId(), a.GetFinishedAt(), d
	case *hooklinev1.DeliveryExpired:
		d := deliveryData{
			EndpointID: m.GetEndpointId(), DeliveryID: m.GetDeliveryId(), EventID: m.GetEventId(),
			Reason: "expired", Attempts: m.GetAttempts(),
		}
		typ, tenant, endpoint, at, data = DeliveryFailed, m.GetTenantId(), m.GetEndpointId(), m.GetAt(), d
	case *hooklinev1.RecoveryFinished:
		d := recoveryData{
			EndpointID: m.GetEndpointId(), RecoveryID: m.GetRecoveryId(), Reason: enumWord(m.GetReason().String(), "REASON_"),
			Found: m.GetFound(), Requested: m.GetRequested(),
		}
		typ, tenant, endpoint, at, data = RecoveryFinished, m.GetTenantId(), m.GetEndpointId(), m.GetAt(), d
	case *hooklinev1.SecretRotated:
		d := rotationStartedData{EndpointID: m.GetEndpointId(), Version: m.GetSecret().GetVersion(), PreviousVersion: m.GetPreviousVersion()}
		if m.GetPreviousExpiresAt() != nil {
			d.PreviousExpiresAt = stamp(m.GetPreviousExpiresAt().AsTime())
		}
		typ, tenant, endpoint, at, data = RotationStarted, m.GetTenantId(), m.GetEndpointId(), m.GetAt(), d
	case *hooklinev1.SecretRetired:
		d := rotationEndedData{EndpointID: m.GetEndpointId(), Version: m.GetVersion(), Reason: enumWord(m.GetReason().String(), "REASON_")}
		typ, tenant, endpoint, at, data = RotationEnded, m.GetTenantId(), m.GetEndpointId(), m.GetAt(), d
	default:
		return Event{}, false
	}
	if tenant == "" || endpoint == "" {
		return Event{}, false
	}
	occurred := rec.Recorded
	if at != nil {
		occurred = at.AsTime()
	}
	occurred = occurred.UTC()
	payload, err := json.Marshal(envelope{
		Type: typ, Timestamp: stamp(occurred), Data: data,
		Cause: cause{Stream: rec.Stream, Revision: uint64(rec.Revision), Event: rec.Type},
	})
	if err != nil { // plain structs of strings and numbers: cannot fail
		panic("operational: encode payload: " + err.Error())
	}
	return Event{
		TenantID: tenant, ID: EventID(rec.ID), Type: typ, OccurredAt: occurred, Payload: payload,
		EndpointID: endpoint, Recorded: rec.Recorded,
	}, true
}

// stamp formats a time as the payloads do: RFC 3339 in UTC, with the
// fraction it has.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// enumWord turns a protobuf enum name into the payloads' word:
// REASON_OVERLAP_ENDED → overlap_ended.
func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

func errorClass(c hooklinev1.ErrorClass) string {
	if c == hooklinev1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
		return ""
	}
	return enumWord(c.String(), "ERROR_CLASS_")
}

// example builds the example payload of an event type from a sample cause.
func example(eventType string) []byte {
	at := timestamppb.New(time.Date(2026, 12, 1, 9, 12, 4, 0, time.UTC))
	const tenant, ep, dlv = "acme", "ep_orders", "dlv_4x7kq2m3b5n6p7r8s9t2v3w4y5"
	failed := &hooklinev1.Attempt{
		TenantId: tenant, EndpointId: ep, DeliveryId: dlv, EventId: "inv_7", EventType: "invoice.paid",
		Number: 15, HttpStatus: 503, ErrorClass: hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS, Error: "503 Service Unavailable", FinishedAt: at,
	}
	var msg proto.Message
	stream := events.EndpointStream(ep)
	switch eventType {
	case EndpointPaused:
		msg = &hooklinev1.EndpointPaused{TenantId: tenant, EndpointId: ep, Reason: hooklinev1.EndpointPaused_REASON_GONE, DeliveryId: dlv, At: at}
	case CircuitOpened:
		msg = &hooklinev1.CircuitOpened{TenantId: tenant, EndpointId: ep, ConsecutiveFailures: 5, LastError: hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT,
			Until: timestamppb.New(at.AsTime().Add(30 * time.Second)), CoolDownMs: 30_000, At: at}
	case CircuitClosed:
		msg = &hooklinev1.CircuitClosed{TenantId: tenant, EndpointId: ep, At: at}
	case DeliveryFailed:
		msg, stream = &hooklinev1.AttemptFailed{Attempt: &hooklinev1.Attempt{
			TenantId: tenant, EndpointId: ep, DeliveryId: dlv, EventId: "inv_7", EventType: "invoice.paid",
			Number: 1, HttpStatus: 400, ErrorClass: hooklinev1.ErrorClass_ERROR_CLASS_HTTP_STATUS, Error: "400 Bad Request", FinishedAt: at,
		}}, events.DeliveryStream(dlv)
	case AttemptsExhausted:
		msg, stream = &hooklinev1.AttemptFailed{Attempt: failed, Retryable: true}, events.DeliveryStream(dlv)
	case RecoveryFinished:
		msg = &hooklinev1.RecoveryFinished{TenantId: tenant, EndpointId: ep, RecoveryId: "rcv_6f1d2c3b4a5e6f70", Reason: hooklinev1.RecoveryFinished_REASON_DONE, Found: 120, Requested: 120, At: at}
	case RotationStarted:
		msg = &hooklinev1.SecretRotated{TenantId: tenant, EndpointId: ep, Secret: &hooklinev1.SealedSecret{Version: 3}, PreviousVersion: 2,
			PreviousExpiresAt: timestamppb.New(at.AsTime().Add(24 * time.Hour)), At: at}
	case RotationEnded:
		msg = &hooklinev1.SecretRetired{TenantId: tenant, EndpointId: ep, Version: 2, Reason: hooklinev1.SecretRetired_REASON_OVERLAP_ENDED, At: at}
	default:
		return nil
	}
	rec := &events.Record{Stream: stream, Revision: 4, ID: events.NewID("example", eventType), Type: events.TypeOf(msg), Recorded: at.AsTime()}
	ev, _ := Of(rec, msg)
	return ev.Payload
}
