package history

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// A delivery's record is stored as a hooklinev1.DeliveryRecord, protobuf:
// compact, several times cheaper to write and read than the JSON of
// before, which decodeRecord still reads (a JSON record starts with '{',
// which no DeliveryRecord does: its first field tag is 0x0a).

// Record returns d as a DeliveryRecord, the form nodes exchange.
func (d *Delivery) Record() *hooklinev1.DeliveryRecord {
	return &hooklinev1.DeliveryRecord{
		Id: d.ID, TenantId: d.TenantID, EndpointId: d.EndpointID, EventId: d.EventID, EventType: d.EventType,
		ConfigVersion: d.ConfigVersion, Status: hooklinev1.DeliveryRecord_Status(d.Status),
		PlannedAt: ts(d.PlannedAt), ExpiresAt: ts(d.ExpiresAt), Attempts: d.Attempts, LastAttemptAt: ts(d.LastAttemptAt),
		LastHttpStatus: d.LastHTTPStatus, LastError: d.LastError, NextAttemptAt: ts(d.NextAttemptAt),
		EndedAt: ts(d.EndedAt), Expired: d.Expired, Replays: d.Replays,
		OrderingKey: d.OrderingKey, Sequence: d.Sequence, LastPulled: d.LastPulled, LastErrorClass: d.LastErrorClass,
	}
}

// FromRecord is the inverse of [Delivery.Record].
func FromRecord(r *hooklinev1.DeliveryRecord) Delivery {
	return Delivery{
		ID: r.GetId(), TenantID: r.GetTenantId(), EndpointID: r.GetEndpointId(), EventID: r.GetEventId(), EventType: r.GetEventType(),
		ConfigVersion: r.GetConfigVersion(), Status: Status(r.GetStatus()),
		PlannedAt: asTime(r.GetPlannedAt()), ExpiresAt: asTime(r.GetExpiresAt()), Attempts: r.GetAttempts(),
		LastAttemptAt: asTime(r.GetLastAttemptAt()), LastHTTPStatus: r.GetLastHttpStatus(), LastError: r.GetLastError(),
		NextAttemptAt: asTime(r.GetNextAttemptAt()), EndedAt: asTime(r.GetEndedAt()), Expired: r.GetExpired(), Replays: r.GetReplays(),
		OrderingKey: r.GetOrderingKey(), Sequence: r.GetSequence(), LastPulled: r.GetLastPulled(), LastErrorClass: r.GetLastErrorClass(),
	}
}

func encodeRecord(d *Delivery) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(d.Record())
}

func decodeRecord(v []byte) (Delivery, error) {
	if len(v) > 0 && v[0] == '{' {
		var d Delivery
		if err := json.Unmarshal(v, &d); err != nil {
			return Delivery{}, fmt.Errorf("decode delivery: %w", err)
		}
		return d, nil
	}
	var r hooklinev1.DeliveryRecord
	if err := proto.Unmarshal(v, &r); err != nil {
		return Delivery{}, fmt.Errorf("decode delivery: %w", err)
	}
	return FromRecord(&r), nil
}

// ts converts a time, the zero time to nil.
func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
