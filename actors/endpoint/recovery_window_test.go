package endpoint_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestRecoverWindowDryRun: a dry run answers the manifest of the window's
// exact list and writes nothing; a bad filter names its field; a digest
// that does not match is refused naming digest; the run with the dry
// run's digest replays that list.
func TestRecoverWindowDryRun(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusNotFound))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	var ids []string
	for _, e := range []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5"} {
		ids = append(ids, b.publish("acme", e, "ep_1")...)
	}
	b.waitStatus("acme", history.Failed, ids...)
	rc.setRespond(status(http.StatusOK))
	// Every delivery was planned at the bench's one time: replay order is
	// by id.
	want := slices.Sorted(slices.Values(ids))
	recover := func(edit func(*controlv1.RecoverEndpointRequest)) *internalv1.EndpointReply {
		rq := &controlv1.RecoverEndpointRequest{Since: timestamppb.New(t0.Add(-time.Hour)), Until: timestamppb.New(t0.Add(time.Hour))}
		edit(rq)
		return ask(t, b.sys, pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_Recover{Recover: rq}})
	}

	for _, tc := range []struct {
		name  string
		edit  func(*controlv1.RecoverEndpointRequest)
		code  internalv1.GrainError_Code
		field string
	}{
		{name: "unknown status", edit: func(r *controlv1.RecoverEndpointRequest) { r.Statuses = []string{"lost"} }, code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "statuses"},
		{name: "wildcard type", edit: func(r *controlv1.RecoverEndpointRequest) { r.EventTypes = []string{"invoice.*"} }, code: internalv1.GrainError_CODE_INVALID_ARGUMENT, field: "event_types"},
		{name: "digest of another list", edit: func(r *controlv1.RecoverEndpointRequest) { r.Digest = endpoint.ListDigest(want[1:]) }, code: internalv1.GrainError_CODE_FAILED_PRECONDITION, field: "digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := recover(tc.edit)
			if rep.GetError().GetCode() != tc.code || rep.GetError().GetField() != tc.field {
				t.Fatalf("answered %v, want %v naming %s", rep, tc.code, tc.field)
			}
		})
	}

	dry := mustOK(t, recover(func(r *controlv1.RecoverEndpointRequest) { r.DryRun = true })).GetRecovery()
	m := dry.GetManifest()
	if !dry.GetDryRun() || dry.GetState() != "dry_run" || m.GetDeliveries() != 5 || m.GetDigest() != endpoint.ListDigest(want) ||
		!slices.Equal(m.GetDeliveryIds(), want) || m.GetRatePerSecond() <= 0 ||
		m.GetEstimatedSeconds() != float64(max(0, 5-m.GetBurst()))/m.GetRatePerSecond() || !slices.Equal(dry.GetStatuses(), []string{"failed"}) {
		t.Fatalf("dry run: %v", dry)
	}
	if other := mustOK(t, recover(func(r *controlv1.RecoverEndpointRequest) {
		r.DryRun, r.EventTypes = true, []string{"order.paid"}
	})).GetRecovery(); other.GetManifest().GetDeliveries() != 0 {
		t.Fatalf("dry run of another type: %v", other)
	}
	if recs := mustOK(t, ask(t, b.sys, pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_ListRecoveries{ListRecoveries: &controlv1.ListRecoveriesRequest{}}})); len(recs.GetRecoveries()) != 0 {
		t.Fatalf("a dry run started a recovery: %v", recs)
	}

	rid := mustOK(t, recover(func(r *controlv1.RecoverEndpointRequest) { r.Digest = strings.ToUpper(m.GetDigest()) })).GetRecovery().GetRecoveryId()
	waitUntil(t, "the recovery done and its attempts recorded", func() bool {
		rec := mustOK(t, ask(t, b.sys, pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_GetRecovery{GetRecovery: &controlv1.GetRecoveryRequest{RecoveryId: rid}}})).GetRecovery()
		return rec.GetDone() && rec.GetReplayed() == 5 && rec.GetManifest().GetDigest() == m.GetDigest()
	})
	b.waitStatus("acme", history.Succeeded, ids...)
}
