package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/confcheck"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Name is the history's projection name; renaming it rebuilds it.
const Name = "history"

// Defaults of the zero Config.
const (
	DefaultRetention  = 30 * 24 * time.Hour
	DefaultPruneEvery = time.Hour
	DefaultScanBudget = 10_000
	DefaultLimit      = 50
	MaxLimit          = 1000
)

// Status is where a delivery stands.
type Status uint8

const (
	// Pending: no success yet and not ended.
	Pending Status = 1
	// Succeeded: some attempt got a 2xx. Final: a later replay that fails
	// does not undo it.
	Succeeded Status = 2
	// Failed: ended without success (a permanent failure, the last allowed
	// attempt, or expiry). A later replay that succeeds makes it Succeeded.
	Failed Status = 3
)

func (s Status) String() string {
	switch s {
	case Pending:
		return "pending"
	case Succeeded:
		return "succeeded"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Delivery is one event travelling to one endpoint, as history shows it.
type Delivery struct {
	ID            string
	TenantID      string
	EndpointID    string
	EventID       string
	EventType     string
	ConfigVersion int64
	Status        Status
	PlannedAt     time.Time
	ExpiresAt     time.Time
	// Attempts counts the recorded attempts, manual ones included.
	Attempts      int32
	LastAttemptAt time.Time
	// LastHTTPStatus, LastError and LastErrorClass describe the last
	// attempt; LastPulled says it was a pull, which has no HTTP status.
	LastHTTPStatus int32
	LastError      string
	LastErrorClass hooklinev1.ErrorClass `json:",omitempty"`
	LastPulled     bool                  `json:",omitempty"`
	// NextAttemptAt is the scheduled automatic retry; zero when none.
	NextAttemptAt time.Time
	// EndedAt is when the delivery succeeded or failed; zero while pending.
	EndedAt time.Time
	Expired bool
	// Replays counts the manual replays requested.
	Replays int32
	// OrderingKey is the event's ordering key on an endpoint that orders
	// by key, and Sequence the delivery's place among that key's, from its
	// first attempt (0 before).
	OrderingKey string `json:",omitempty"`
	Sequence    int64  `json:",omitempty"`
}

// Attempt is one recorded attempt of a delivery.
type Attempt struct {
	Succeeded bool
	Attempt   *hooklinev1.Attempt
	// Retryable and NextAttemptAt come from AttemptFailed.
	Retryable     bool
	NextAttemptAt time.Time
}

// Config configures a [History]. The zero value is valid.
type Config struct {
	// Retention is how long deliveries are kept after they were planned;
	// 0 means DefaultRetention (30 days).
	Retention time.Duration
	// PruneEvery is how often Run prunes; 0 means DefaultPruneEvery.
	PruneEvery time.Duration
	// ScanBudget bounds the index entries one Search reads; 0 means
	// DefaultScanBudget.
	ScanBudget int
	// Log is read for a delivery's attempts (its delivery stream): history
	// does not keep a second copy of them. Nil answers Attempts with an
	// error.
	Log events.Log
	// Archive, when set, is read for the attempts of a delivery whose
	// stream the log dropped past its retention.
	Archive events.StreamArchive
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	return confcheck.All("history config",
		confcheck.NotNegative("retention", c.Retention),
		confcheck.NotNegative("prune every", c.PruneEvery),
		confcheck.NotNegative("scan budget", c.ScanBudget),
	)
}

func (c Config) withDefaults() Config {
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.PruneEvery = cmp.Or(c.PruneEvery, DefaultPruneEvery)
	c.ScanBudget = cmp.Or(c.ScanBudget, DefaultScanBudget)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// History is the projection of deliveries and their attempts, searchable
// by tenant, endpoint, status, event type and planned time, newest first.
// Queries, Prune and Run are safe for concurrent use with the runner.
type History struct {
	store  *projections.Store
	cfg    Config
	recent *projections.Recent[Delivery] // records written lately, for Apply and Prune only
}

// recentDeliveries bounds the records Apply remembers: tens of seconds of
// new deliveries at a few thousand per second, which is when most outcomes
// come.
const recentDeliveries = 65536

// New registers a History with r.
func New(r *projections.Runner, cfg Config) (*History, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &History{cfg: cfg.withDefaults(), recent: projections.NewRecent[Delivery](recentDeliveries)}
	return projections.Registered(r, h, func(s *projections.Store) { h.store = s })
}

// Name implements [projections.Projection].
func (*History) Name() string { return Name }

// PartitionsChanged implements [projections.Partitioned]: history keeps no
// state per partition in memory; searches say which partitions they want.
func (*History) PartitionsChanged(events.PartitionSet) {}

// Filter implements [projections.Projection].
func (*History) Filter() events.Filter {
	return events.Filter{
		StreamPrefixes: []string{events.EventCategory + "-", events.DeliveryCategory + "-"},
		Types:          []string{"DeliveriesPlanned", "AttemptSucceeded", "AttemptFailed", "DeliveryExpired", "ReplayRequested", "OrderingKeySkipped"},
	}
}

// Get returns a delivery of a tenant; ok is false when the tenant has no
// such delivery (or it was pruned).
func (h *History) Get(tenantID, deliveryID string) (d Delivery, ok bool, err error) {
	d, ok, err = h.load(h.store, deliveryID)
	if err != nil || !ok || d.TenantID != tenantID {
		return Delivery{}, false, err
	}
	return d, true, nil
}

// Attempts returns a delivery's recorded attempts, oldest first, read from
// its delivery stream in the log, or in the archive once the log dropped
// it: none when the stream is gone (retention, no archive) or was never
// written.
func (h *History) Attempts(ctx context.Context, deliveryID string) ([]Attempt, error) {
	if h.cfg.Log == nil {
		return nil, errors.New("history: no log to read attempts from")
	}
	stream := events.DeliveryStream(deliveryID)
	var out []Attempt
	for from := events.Revision(0); ; {
		recs, err := h.cfg.Log.ReadStream(ctx, stream, events.Forwards, from, attemptsPage)
		if errors.Is(err, events.ErrStreamNotFound) && from == 0 && h.cfg.Archive != nil {
			recs, err = h.cfg.Archive.ReadStream(ctx, stream)
			if err == nil {
				return attemptsOf(deliveryID, recs, nil)
			}
		}
		if errors.Is(err, events.ErrStreamNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("attempts of %s: %w", deliveryID, err)
		}
		if out, err = attemptsOf(deliveryID, recs, out); err != nil {
			return nil, err
		}
		if len(recs) < attemptsPage {
			return out, nil
		}
		from = recs[len(recs)-1].Revision + 1
	}
}

// attemptsOf appends the attempts that recs (of a delivery stream) record
// to out.
func attemptsOf(deliveryID string, recs []events.Record, out []Attempt) ([]Attempt, error) {
	for i := range recs {
		msg, err := events.Decode(&recs[i])
		if err != nil {
			return nil, fmt.Errorf("attempts of %s: %w", deliveryID, err)
		}
		switch m := msg.(type) {
		case *hooklinev1.AttemptSucceeded:
			out = append(out, Attempt{Succeeded: true, Attempt: m.GetAttempt()})
		case *hooklinev1.AttemptFailed:
			out = append(out, Attempt{Attempt: m.GetAttempt(), Retryable: m.GetRetryable(), NextAttemptAt: asTime(m.GetNextAttemptAt())})
		}
	}
	return out, nil
}

// attemptsPage is how many events of a delivery stream Attempts reads at a
// time; a delivery has tens of events at most.
const attemptsPage = 256

// reader is what both a Store and a Batch offer for point reads.
type reader interface {
	Get(key []byte) ([]byte, bool, error)
}

// load finds a delivery through its id entry. A dangling entry (its day was
// pruned) counts as absent.
func (h *History) load(r reader, deliveryID string) (Delivery, bool, error) {
	v, ok, err := r.Get(idKey(deliveryID))
	if err != nil || !ok {
		return Delivery{}, false, err
	}
	planned, _, err := projections.ReadTimeDesc(v)
	if err != nil {
		return Delivery{}, false, fmt.Errorf("delivery %s: %w", deliveryID, err)
	}
	return h.loadRecord(r, recordKey(planned, deliveryID))
}

func (h *History) loadRecord(r reader, key []byte) (Delivery, bool, error) {
	v, ok, err := r.Get(key)
	if err != nil || !ok {
		return Delivery{}, false, err
	}
	d, err := decodeRecord(v)
	if err != nil {
		return Delivery{}, false, err
	}
	return d, true, nil
}

// Apply implements [projections.Projection]. Outcomes of a delivery that
// history does not hold (pruned, or planned before the log's retention)
// are skipped. The attempts themselves are not copied: [History.Attempts]
// reads them from the log.
func (h *History) Apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	switch m := msg.(type) {
	case *hooklinev1.DeliveriesPlanned:
		// A delivery is planned once: its event stream is appended with
		// expected revision NoStream. Planned again after its event stream
		// expired and the event was published again, it is a new record
		// under its new planned time (every key but the id's has the
		// planned time in it, so none is set twice: see update), and the
		// old one goes with its day.
		for _, p := range m.GetDeliveries() {
			d := Delivery{
				ID: p.GetDeliveryId(), TenantID: m.GetTenantId(), EndpointID: p.GetEndpointId(),
				EventID: m.GetEventId(), EventType: m.GetEventType(), ConfigVersion: p.GetConfigVersion(),
				Status: Pending, PlannedAt: asTime(m.GetAt()), ExpiresAt: asTime(m.GetExpiresAt()),
			}
			if p.GetOrdering() != hooklinev1.KeyOrdering_KEY_ORDERING_NONE {
				d.OrderingKey = m.GetOrderingKey()
			}
			if err := b.Set(idKey(d.ID), projections.AppendTimeDesc(nil, d.PlannedAt)); err != nil {
				return err
			}
			v := indexValue(&d)
			for _, k := range indexKeys(&d) {
				if err := b.Set(k, v); err != nil {
					return err
				}
			}
			if err := h.putRecord(b, &d); err != nil {
				return err
			}
		}
		return nil
	case *hooklinev1.AttemptSucceeded:
		a := m.GetAttempt()
		return h.update(b, a.GetDeliveryId(), func(d *Delivery) error {
			noteAttempt(d, a)
			d.NextAttemptAt = time.Time{}
			if d.Status != Succeeded {
				d.Status, d.EndedAt = Succeeded, asTime(a.GetFinishedAt())
			}
			return nil
		})
	case *hooklinev1.AttemptFailed:
		a := m.GetAttempt()
		return h.update(b, a.GetDeliveryId(), func(d *Delivery) error {
			noteAttempt(d, a)
			d.NextAttemptAt = asTime(m.GetNextAttemptAt())
			switch {
			case d.Status == Succeeded:
			case m.GetNextAttemptAt() != nil:
				d.Status, d.EndedAt = Pending, time.Time{}
			default:
				d.Status, d.EndedAt = Failed, asTime(a.GetFinishedAt())
			}
			return nil
		})
	case *hooklinev1.DeliveryExpired:
		return h.update(b, m.GetDeliveryId(), func(d *Delivery) error {
			d.Expired, d.NextAttemptAt = true, time.Time{}
			if d.Status != Succeeded {
				d.Status, d.EndedAt = Failed, asTime(m.GetAt())
			}
			return nil
		})
	case *hooklinev1.ReplayRequested:
		return h.update(b, m.GetDeliveryId(), func(d *Delivery) error {
			d.Replays++
			return nil
		})
	case *hooklinev1.OrderingKeySkipped:
		return h.update(b, m.GetDeliveryId(), func(d *Delivery) error {
			if d.Status == Pending {
				d.Status, d.EndedAt, d.NextAttemptAt = Failed, asTime(m.GetAt()), time.Time{}
				d.LastError = "skipped: its ordering key moved on to the next delivery at a person's request"
			}
			return nil
		})
	}
	return nil
}

// update loads a delivery, lets change edit it and writes it back, moving
// its status index entries when its status changed. Those entries are set
// once per status and single-deleted when the status moves on, so that a
// delivery pending for seconds leaves no tombstone behind (a status it
// comes back to was deleted in between).
func (h *History) update(b *projections.Batch, deliveryID string, change func(d *Delivery) error) error {
	d, ok, err := h.loadForApply(b, deliveryID)
	if err != nil || !ok {
		return err
	}
	before := d.Status
	if err := change(&d); err != nil {
		return err
	}
	if d.Status != before {
		old := d
		old.Status = before
		for _, k := range statusKeys(&old) {
			if err := b.SingleDelete(k); err != nil {
				return err
			}
		}
		v := indexValue(&d)
		for _, k := range statusKeys(&d) {
			if err := b.Set(k, v); err != nil {
				return err
			}
		}
	}
	return h.putRecord(b, &d)
}

// loadForApply is load for Apply: the records written lately first.
func (h *History) loadForApply(b *projections.Batch, deliveryID string) (Delivery, bool, error) {
	if d, ok := h.recent.Get(deliveryID); ok {
		return d, true, nil
	}
	return h.load(b, deliveryID)
}

func noteAttempt(d *Delivery, a *hooklinev1.Attempt) {
	d.Attempts++
	d.LastAttemptAt = asTime(a.GetStartedAt())
	d.LastHTTPStatus, d.LastError, d.LastErrorClass, d.LastPulled = a.GetHttpStatus(), a.GetError(), a.GetErrorClass(), a.GetPulled()
	if a.GetSequence() > 0 {
		d.OrderingKey, d.Sequence = a.GetOrderingKey(), a.GetSequence()
	}
}

func (h *History) putRecord(b *projections.Batch, d *Delivery) error {
	v, err := encodeRecord(d)
	if err != nil {
		return fmt.Errorf("encode delivery %s: %w", d.ID, err)
	}
	h.recent.Put(d.ID, *d)
	return b.Set(recordKey(d.PlannedAt, d.ID), v)
}

// asTime converts a timestamp, nil to the zero time.
func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
