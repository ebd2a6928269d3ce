package projections_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// counter counts TenantCreated events: in memory (this instance's applies)
// and in its store (all applies ever), and can be told to fail on a tenant.
type counter struct {
	applied int
	failOn  string
}

func (*counter) Name() string { return "counter" }

func (*counter) Filter() events.Filter { return events.Filter{Types: []string{"TenantCreated"}} }

func (c *counter) Apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	if id := msg.(*hooklinev1.TenantCreated).GetTenantId(); id == c.failOn {
		return fmt.Errorf("refusing %s", id)
	}
	v, _, err := b.Get([]byte("n"))
	if err != nil {
		return err
	}
	n := uint64(0)
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	c.applied++
	return b.Set([]byte("n"), binary.BigEndian.AppendUint64(nil, n+1))
}

func stored(t *testing.T, s *projections.Store) uint64 {
	t.Helper()
	v, ok, err := s.Get([]byte("n"))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func openLog(t *testing.T) *embedded.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func createTenants(t *testing.T, l events.Log, from, to int) events.Position {
	t.Helper()
	var last events.Position
	for i := from; i < to; i++ {
		id := fmt.Sprintf("t%03d", i)
		ev, err := events.Encode(&hooklinev1.TenantCreated{TenantId: id, Name: id}, "create "+id, events.TenantStream(id))
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append(context.Background(), events.TenantStream(id), events.NoStream{}, ev)
		if err != nil {
			t.Fatal(err)
		}
		last = res.Position
	}
	return last
}

// run starts r.Run and returns a function that stops it and returns Run's
// error.
func run(t *testing.T, r *projections.Runner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var err error
	stopped := false
	stop = func() error {
		if !stopped {
			cancel()
			err = <-done
			stopped = true
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func waitFor(t *testing.T, r *projections.Runner, pos events.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, pos); err != nil {
		t.Fatal(err)
	}
}

func TestRunnerAppliesEachEventOnceAcrossRestarts(t *testing.T) {
	l := openLog(t)
	fs := vfs.NewMem()
	head := createTenants(t, l, 0, 10)

	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	s, err := r.Register(c)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	waitFor(t, r, head)
	if got := stored(t, s); got != 10 || c.applied != 10 {
		t.Fatalf("after first run: stored %d, applied %d; want 10, 10", got, c.applied)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Events appended while no runner runs are applied once by the next.
	head = createTenants(t, l, 10, 15)
	r, err = projections.Open(l, projections.Config{Dir: "proj", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c = &counter{}
	if s, err = r.Register(c); err != nil {
		t.Fatal(err)
	}
	run(t, r)
	waitFor(t, r, head)
	if got := stored(t, s); got != 15 || c.applied != 5 {
		t.Fatalf("after restart: stored %d, applied %d; want 15, 5", got, c.applied)
	}
	if got := r.Checkpoints()["counter"]; got != head {
		t.Errorf("checkpoint = %s, want %s", got, head)
	}
}

func TestRunnerFailedBatchWritesNothing(t *testing.T) {
	l := openLog(t)
	fs := vfs.NewMem()
	first := createTenants(t, l, 0, 3)

	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{failOn: "t004"}
	s, err := r.Register(c)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	waitFor(t, r, first)
	// t003 and t004 in one append would share a batch; separately they
	// may not, so the checkpoint must stop before t004 in any case.
	head := createTenants(t, l, 3, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, head); !errors.Is(err, projections.ErrStopped) {
		t.Fatalf("WaitFor past a failing event = %v, want ErrStopped", err)
	}
	if err := stop(); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want the projection's error", err)
	}
	applied := r.Applied()
	if got := stored(t, s); got != 3 && got != 4 {
		t.Fatalf("stored %d before the failing event, want 3 or 4", got)
	}
	before := stored(t, s)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// A fixed projection resumes from the checkpoint: nothing twice.
	r, err = projections.Open(l, projections.Config{Dir: "proj", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c = &counter{}
	if s, err = r.Register(c); err != nil {
		t.Fatal(err)
	}
	if got := r.Applied(); got != applied {
		t.Fatalf("reopened at %s, want %s", got, applied)
	}
	run(t, r)
	waitFor(t, r, head)
	if got := stored(t, s); got != 6 || uint64(c.applied) != 6-before {
		t.Fatalf("after fix: stored %d, applied %d; want 6, %d", got, c.applied, 6-before)
	}
}

func TestWaitForReturnsOnEventsNoProjectionWants(t *testing.T) {
	l := openLog(t)
	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Register(&counter{}); err != nil {
		t.Fatal(err)
	}
	run(t, r)

	ev, err := events.Encode(&hooklinev1.EndpointPaused{TenantId: "t", EndpointId: "e"}, "pause", "endpoint-e")
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Append(context.Background(), events.EndpointStream("e"), events.NoStream{}, ev)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, res.Position)

	lag, err := r.Lag(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if lag.Behind != 0 || lag.Applied != res.Position || lag.Head != res.Position {
		t.Errorf("Lag = %+v, want caught up at %s", lag, res.Position)
	}
}

func TestWaitForBlocksUntilApplied(t *testing.T) {
	l := openLog(t)
	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Register(&counter{}); err != nil {
		t.Fatal(err)
	}
	head := createTenants(t, l, 0, 2)

	// Not running yet: WaitFor must wait, not answer.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.WaitFor(ctx, head); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor before Run = %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- r.WaitFor(ctx, head)
	}()
	run(t, r)
	if err := <-done; err != nil {
		t.Fatalf("WaitFor = %v", err)
	}
	if _, err := r.Register(&counter{}); !errors.Is(err, projections.ErrRunning) {
		t.Errorf("Register while running = %v, want ErrRunning", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (projections.Config{}).Validate(); err == nil {
		t.Error("zero Config validated; Dir is required")
	}
	if _, err := projections.Open(openLog(t), projections.Config{}); err == nil {
		t.Error("Open with zero Config succeeded")
	}
}
