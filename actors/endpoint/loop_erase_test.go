package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// TestLoopErasedStragglers: a tenant is erased while one attempt of its
// endpoint is out and another delivery waits, ready, for the endpoint's
// in-flight limit. The waiting one is never sent and ends ERASED; the
// answer to the one that was out is recorded (it succeeded) without its
// body under any key that still opens.
func TestLoopErasedStragglers(t *testing.T) {
	const marker = "RESPONSE-AFTER-ERASURE-7c1f"
	b := newBench(t)
	payloads := seal.NewPayloads(b.log.(events.Vault), b.cfg.Keyring, b.reg.DataKeyErased)
	b.cfg.Payloads = payloads
	arrived, release := make(chan string, 4), make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		arrived <- r.Header.Get("webhook-id")
		<-release
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, marker)
	})
	b.endpoint("gone", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 1 })
	ctx := t.Context()
	var ids []string
	var keyID string
	for _, id := range []string{"evt_1", "evt_2"} {
		pub, plan := b.event("gone", id, "ep_1")
		stored, err := payloads.SealEvent(ctx, pub)
		if err != nil {
			t.Fatal(err)
		}
		keyID = stored.GetPayloadSeal().GetDataKeyId()
		ids = append(ids, b.append(stored, plan)...)
	}
	var out string
	select {
	case out = <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt started")
	}
	waiting := ids[0]
	if waiting == out {
		waiting = ids[1]
	}

	// The erasure, as the tenant grain records it and the node applies it.
	tenantStream := events.TenantStream("gone")
	var evs []events.Event
	for i, m := range []proto.Message{
		&hooklinev1.TenantCreated{TenantId: "gone", Name: "gone", At: timestamppb.New(b.clk.Now())},
		&hooklinev1.TenantErased{TenantId: "gone", DataKeyId: keyID, At: timestamppb.New(b.clk.Now())},
	} {
		ev, err := events.Encode(m, fmt.Sprint("tenant/", i), tenantStream)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := b.log.Append(ctx, tenantStream, events.NoStream{}, evs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.runner.WaitFor(ctx, res.Position); err != nil {
		t.Fatal(err)
	}
	if err := payloads.Destroy(ctx, "gone", keyID); err != nil {
		t.Fatal(err)
	}
	close(release)

	ended := b.waitEvents(waiting, 1)[0]
	if n := rc.count(waiting); n != 0 {
		t.Fatalf("the delivery that waited was sent %d times after the erasure", n)
	}
	if failed, ok := ended.(*hooklinev1.AttemptFailed); !ok || failed.GetAttempt().GetErrorClass() != hooklinev1.ErrorClass_ERROR_CLASS_ERASED {
		t.Fatalf("the delivery that waited ended with %v; want failed, ERASED", ended)
	}
	b.waitStatus("gone", history.Failed, waiting)
	done, ok := b.waitEvents(out, 1)[0].(*hooklinev1.AttemptSucceeded)
	if !ok {
		t.Fatalf("the attempt that was out: %v", done)
	}
	a := done.GetAttempt()
	body, err := payloads.Open(context.Background(), "gone", seal.ResponseAAD("gone", out), a.GetResponsePrefix(), a.GetResponseSeal())
	if err == nil && len(body) > 0 {
		t.Fatalf("the response to the attempt that was out opens after the erasure (sealed under %v): %q", a.GetResponseSeal(), body)
	}
	if err != nil && !errors.Is(err, seal.ErrErased) {
		t.Fatal(err)
	}
}
