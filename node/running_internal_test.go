package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/owners"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestTakeOverPassesHeldAttemptsOn: a member that takes a partition over
// from one that died lists, in its FAILOVER, the attempts the table lists
// as running on an earlier owner (the dead member held them for it) whose
// time is not out: the earlier owner may still be sending them. Before, a
// takeover listed none, and the new owner attempted them at once.
func TestTakeOverPassesHeldAttemptsOn(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	l, r := memLogAndRunner(t)
	o, err := owners.New(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	m := &partitions{log: l, runner: r, owners: o, logger: quiet, now: func() time.Time { return now }}

	// a handed the endpoint's partition to b while attempting two of its
	// deliveries: one whose time runs out in a minute, one whose time is
	// out now.
	p := events.PartitionOf("ep_held")
	later, past := now.Add(time.Minute), now.Add(-time.Second)
	expected := o.Table().Expected()
	pos, ok := m.assign(ctx, &expected, []events.Partition{p}, "b:1", "a:1", hooklinev1.PartitionsAssigned_REASON_HANDOVER, []endpoint.Running{
		{EndpointID: "ep_held", DeliveryID: "dlv_sending", Attempt: 2, Until: later},
		{EndpointID: "ep_held", DeliveryID: "dlv_out", Attempt: 1, Until: past},
	})
	if !ok {
		t.Fatal("the hand-over was not appended")
	}
	if err := r.WaitFor(ctx, pos); err != nil {
		t.Fatal(err)
	}

	// b dies; c takes the partition over.
	m.record(ctx, "c:1", plan{take: map[hooklinev1.PartitionsAssigned_Reason]map[string][]events.Partition{
		hooklinev1.PartitionsAssigned_REASON_FAILOVER: {"b:1": {p}},
	}})
	recs, err := l.ReadStream(ctx, events.OwnersStream, events.Forwards, 0, 10)
	if err != nil || len(recs) != 2 {
		t.Fatalf("the table's stream holds %d changes, %v; want the hand-over and the takeover", len(recs), err)
	}
	msg, err := events.Decode(&recs[1])
	if err != nil {
		t.Fatal(err)
	}
	took := msg.(*hooklinev1.PartitionsAssigned)
	want := []*hooklinev1.RunningAttempt{{EndpointId: "ep_held", DeliveryId: "dlv_sending", Attempt: 2, Until: timestamppb.New(later)}}
	if took.GetReason() != hooklinev1.PartitionsAssigned_REASON_FAILOVER || !cmp.Equal(want, took.GetRunning(), protocmp.Transform()) {
		t.Errorf("the takeover lists %v; want only a's attempt 2 of dlv_sending, until %v", took.GetRunning(), later)
	}
}

// TestPassOn: a change passes on the attempts the table lists for its
// partitions whose time is not out, beside its own; a delivery listed twice
// is listed once, with its latest attempt.
func TestPassOn(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var table owners.Table
	table.Owners[5].Running = []owners.Running{
		{EndpointID: "ep_5", DeliveryID: "dlv_a", Attempt: 1, Until: now.Add(time.Minute)},
		{EndpointID: "ep_5", DeliveryID: "dlv_b", Attempt: 3, Until: now.Add(time.Minute)},
		{EndpointID: "ep_5", DeliveryID: "dlv_gone", Attempt: 1, Until: now},
	}
	table.Owners[6].Running = []owners.Running{{EndpointID: "ep_6", DeliveryID: "dlv_other", Attempt: 1, Until: now.Add(time.Minute)}}
	own := []endpoint.Running{
		{EndpointID: "ep_5", DeliveryID: "dlv_a", Attempt: 2, Until: now.Add(30 * time.Second)}, // attempted again here since
		{EndpointID: "ep_5", DeliveryID: "dlv_mine", Attempt: 1, Until: now.Add(30 * time.Second)},
	}
	got := passOn(&table, []events.Partition{5}, own, now)
	want := []endpoint.Running{
		{EndpointID: "ep_5", DeliveryID: "dlv_a", Attempt: 2, Until: now.Add(30 * time.Second)},
		{EndpointID: "ep_5", DeliveryID: "dlv_mine", Attempt: 1, Until: now.Add(30 * time.Second)},
		{EndpointID: "ep_5", DeliveryID: "dlv_b", Attempt: 3, Until: now.Add(time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("passOn (-want +got):\n%s", diff)
	}
}
