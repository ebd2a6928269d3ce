package control_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestPublishDuringErasure: a publish seals its payload, its tenant is
// erased (the node applies the erasure) before its append lands, and it
// is answered after. Its payload is erased with the tenant's key, so its
// answer must say erased: an answer that does not, given once the node
// applied the erasure, would claim a payload that no one can read. A
// repeat says erased too; a publish after the erasure is sealed under a
// new key and reads.
func TestPublishDuringErasure(t *testing.T) {
	n := startSealed(t, control.Config{})
	n.tenant(t, "acme")
	n.endpoint(t, "acme", "ep_1")
	ctx, cancel := context.WithTimeout(as(context.Background(), adminToken), 30*time.Second)
	defer cancel()
	api := controlv1.NewEventServiceClient(n.cc)
	publish := func(id string) (*controlv1.PublishResponse, error) {
		return api.Publish(ctx, &controlv1.PublishRequest{TenantId: "acme", EventId: id, Type: "order.paid", Payload: []byte(`{"note":"` + id + `"}`)})
	}
	readable := func(id string) error {
		_, err := api.GetEvent(ctx, &controlv1.GetEventRequest{TenantId: "acme", EventId: id})
		return err
	}
	if _, err := publish("evt_0"); err != nil { // the tenant's data key, made and kept
		t.Fatal(err)
	}
	keyID, err := n.payloads.CurrentKey(ctx, "acme")
	if err != nil || keyID == "" {
		t.Fatalf("the tenant's key: %q, %v", keyID, err)
	}

	held, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(stream string) {
		if stream == events.EventStream("acme", "evt_1") {
			once.Do(func() {
				close(held)
				<-goOn
			})
		}
	}
	n.log.beforeAppend.Store(&hold)
	type answer struct {
		res *controlv1.PublishResponse
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := publish("evt_1")
		answered <- answer{res, err}
	}()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the publish never reached its append")
	}
	erase(t, n, "acme", keyID)
	close(goOn)
	a := <-answered
	if a.err != nil {
		t.Fatalf("the publish during the erasure: %v", a.err)
	}
	if err := readable("evt_1"); err == nil || !a.res.GetErased() {
		t.Fatalf("the publish during the erasure answered erased=%v, and its payload reads: %v; want erased, and 410", a.res.GetErased(), err)
	}
	if again, err := publish("evt_1"); err != nil || !again.GetDuplicate() || !again.GetErased() {
		t.Fatalf("its repeat: %v, %v; want a duplicate that says erased", again, err)
	}
	after, err := publish("evt_2")
	if err != nil || after.GetErased() {
		t.Fatalf("a publish after the erasure: %v, %v; want accepted, not erased", after, err)
	}
	if err := readable("evt_2"); err != nil {
		t.Fatalf("a payload published after the erasure: %v; want it readable, under a new key", err)
	}
	if err := readable("evt_0"); status.Code(err) != codes.NotFound {
		t.Fatalf("a payload published before the erasure: %v; want NOT_FOUND, erased", err)
	}
}

// erase records the erasure of the tenant's key as its grain does, waits
// until the node has applied it, and destroys the key, as EraseTenant
// does (no grain runs in these tests).
func erase(t *testing.T, n *node, tenantID, keyID string) {
	t.Helper()
	ctx := t.Context()
	stream := events.TenantStream(tenantID)
	ev, err := events.Encode(&hooklinev1.TenantErased{TenantId: tenantID, DataKeyId: keyID, At: timestamppb.Now()}, "erase/"+keyID, stream)
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.log.Append(ctx, stream, events.Any{}, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.runs.WaitFor(ctx, res.Position); err != nil {
		t.Fatal(err)
	}
	if err := n.payloads.Destroy(ctx, tenantID, keyID); err != nil {
		t.Fatal(err)
	}
}
