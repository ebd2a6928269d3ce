package projections_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// BenchmarkRunnerApply measures how fast the runner applies the delivery
// flow to registry, due and history together, catching up from the start of
// a log on an in-memory file system. One op is one event published to 4
// endpoints (EventPublished + DeliveriesPlanned) and its 4 outcomes (3
// AttemptSucceeded, 1 AttemptFailed with a retry): 6 events.
func BenchmarkRunnerApply(b *testing.B) {
	quiet := slog.New(slog.DiscardHandler)
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	at := timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))

	// Append concurrently: the log's group commit keeps setup short.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += 8 {
				if err := appendFlow(ctx, l, i, at); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	head, err := l.Head(ctx)
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if _, err := registry.New(r); err != nil {
		b.Fatal(err)
	}
	if _, err := due.New(r, due.Config{Logger: quiet}); err != nil {
		b.Fatal(err)
	}
	if _, err := history.New(r, history.Config{Logger: quiet}); err != nil {
		b.Fatal(err)
	}
	r.Own(events.AllPartitions())
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	if err := r.WaitFor(ctx, head); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(6*b.N)/b.Elapsed().Seconds(), "events/s")
}

func appendFlow(ctx context.Context, l events.Log, i int, at *timestamppb.Timestamp) error {
	tenant, eventID := "acme", fmt.Sprintf("ev%08d", i)
	planned := &hooklinev1.DeliveriesPlanned{TenantId: tenant, EventId: eventID, EventType: "invoice.paid", At: at, ExpiresAt: at, Chunks: 1}
	for e := range 4 {
		planned.Deliveries = append(planned.Deliveries, &hooklinev1.PlannedDelivery{
			DeliveryId: fmt.Sprintf("d%08d-%d", i, e), EndpointId: fmt.Sprintf("ep%03d", (i+e)%200), ConfigVersion: 1,
		})
	}
	published := &hooklinev1.EventPublished{TenantId: tenant, EventId: eventID, EventType: "invoice.paid", Payload: make([]byte, 512), At: at}
	if err := appendMsgs(ctx, l, events.EventStream(tenant, eventID), events.NoStream{}, published, planned); err != nil {
		return err
	}
	for e, p := range planned.Deliveries {
		a := &hooklinev1.Attempt{TenantId: tenant, EndpointId: p.EndpointId, DeliveryId: p.DeliveryId, EventId: eventID,
			EventType: "invoice.paid", Number: 1, HttpStatus: 200, StartedAt: at, FinishedAt: at}
		var m proto.Message = &hooklinev1.AttemptSucceeded{Attempt: a}
		if e == 3 {
			a.HttpStatus = 503
			m = &hooklinev1.AttemptFailed{Attempt: a, Retryable: true, NextAttemptAt: at}
		}
		if err := appendMsgs(ctx, l, events.DeliveryStream(p.DeliveryId), events.NoStream{}, m); err != nil {
			return err
		}
	}
	return nil
}

func appendMsgs(ctx context.Context, l events.Log, stream string, expected events.ExpectedRevision, msgs ...proto.Message) error {
	var evs []events.Event
	for _, m := range msgs {
		ev, err := events.Encode(m, stream, events.TypeOf(m))
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	_, err := l.Append(ctx, stream, expected, evs...)
	return err
}
