package endpoint

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/seal"
)

// Defaults of the zero Config.
const (
	DefaultIOTimeout = 10 * time.Second
	DefaultReadPage  = 256

	// DefaultRatePerSecond and DefaultBurst size an endpoint's token
	// bucket: 50 attempts/s sustained with bursts of 50 is far above what a
	// healthy receiver sees from one tenant's traffic on average (the
	// reference load is 2,315 deliveries/s over the whole fleet), yet keeps
	// a backlog drained after an outage from hammering a receiver that just
	// came back. Endpoints set their own.
	DefaultRatePerSecond = 50
	DefaultBurst         = 50
	// DefaultMaxInFlight bounds an endpoint's concurrent attempts: with a
	// 15 s attempt timeout, 10 hanging attempts hold at most 10 of the
	// node's slots, while 10 × (1 / 100 ms latency) = 100 attempts/s is
	// above the default rate for a healthy receiver.
	DefaultMaxInFlight = 10
	// DefaultPullLimit is how many due deliveries one pull asks for.
	DefaultPullLimit = 100
	// DefaultIdleAfter is the quiet period after which an idle grain
	// passivates.
	DefaultIdleAfter = 2 * time.Minute
	// DefaultEventRetention is how long the log keeps event streams: 30
	// days, as long as docs/semantics.md promises that an ended delivery
	// stays searchable.
	DefaultEventRetention = 30 * 24 * time.Hour
	// maxTimer bounds one wait of the retirement timer, so that a clock jump
	// is noticed within it.
	maxTimer = time.Hour
)

// Config configures the endpoint grain. Its zero value is invalid only for
// lack of Log and Keyring; every other field has a documented default.
type Config struct {
	// Log is the event log holding endpoint-{endpoint_id}. Required.
	Log events.Log
	// Keyring seals new secrets and opens old ones. Required.
	Keyring *seal.Keyring
	// Archive, when set, is read for an event whose stream the log no
	// longer holds (past retention), so that a replay still sends its
	// bytes; nil: such a delivery ends failed.
	Archive events.StreamArchive
	// Payloads opens the events' sealed payloads and seals the response
	// bodies recorded; nil: payloads and bodies in clear.
	Payloads *seal.Payloads
	// Policy checks URLs at create and update; nil means the zero Policy
	// (production rules: https on 443, public addresses only).
	Policy *attempt.Policy
	// Now is the clock stamping events and ending rotation overlaps; nil
	// means time.Now.
	Now func() time.Time
	// Rand supplies secrets and ed25519 seeds; nil means crypto/rand.Reader.
	Rand io.Reader
	// Logger receives the grain's messages (never a secret); nil means
	// slog.Default().
	Logger *slog.Logger
	// IOTimeout bounds one read of the stream, one URL check and one
	// append; 0 means DefaultIOTimeout (10 s).
	IOTimeout time.Duration
	// LeaseTimeout bounds one quota lease request to the tenant's grain;
	// the grain goes on under a fallback lease when it runs out (see
	// loop_lease.go). 0 means DefaultLeaseTimeout (250 ms).
	LeaseTimeout time.Duration
	// ReadPage is how many events one read of the stream asks for; 0 means
	// DefaultReadPage.
	ReadPage int
	// DefaultOverlap is how long a previous secret stays live after a
	// rotation that does not say; 0 means DefaultOverlap (24 h).
	DefaultOverlap time.Duration
	// IdleAfter is the quiet period (no message at all, real time) after
	// which a grain that holds nothing (no command, no delivery, no
	// recovery under way) leaves memory: it passivates. The next wake or
	// command activates it again, rebuilt from its stream. 0 means
	// DefaultIdleAfter (2 min).
	IdleAfter time.Duration
	// EventRetention is how long the log keeps event streams: a delivery
	// whose event stream is not found ends failed only once its plan is
	// that old (before, the read met a lagging backend and is tried
	// again). 0 means DefaultEventRetention (30 days).
	EventRetention time.Duration

	// The delivery loop (see loop.go). Without Due it is off and the grain
	// only answers commands; with Due, Projections, History and Attempts are
	// required.

	// Due is the due projection the grain pulls its deliveries from
	// (*due.Due).
	Due Due
	// OrderingKeys reads the endpoint's ordering keys (*due.Due); nil
	// refuses ListOrderingKeys and SkipOrderingKey.
	OrderingKeys OrderingKeys
	// Sequences counts the sequences of the endpoint's ordering keys
	// (*due.Due), which the grain numbers their heads from and
	// checkpoints (loop_order.go). Required with Due.
	Sequences Sequences
	// Projections is the node's projection runner (*projections.Runner): on
	// activation the grain waits until it has reached CatchUpTo's position,
	// and before each pull until it has applied the grain's own outcomes.
	Projections Projections
	// CatchUpTo returns the position an endpoint grain of partition p waits
	// for the projections to reach when it starts: past every record of p
	// that an earlier grain of the endpoint appended, here or on the
	// partition's previous owner, so that the new grain repeats no attempt
	// they made. nil means the log's head, which is always far enough but
	// waits also for everything appended since by other partitions and
	// publishers: under load, the projections' lag behind the head, which
	// a grain started by a hand-over adds to the move's pause.
	CatchUpTo func(ctx context.Context, p events.Partition) (events.Position, error)
	// ProvisionalLease reports whether a grain of partition p that has
	// not had a quota lease yet may start attempts, up to its in-flight
	// limit, while it waits for its first one: true on a node that took p
	// over lately from another member, whose grain of the endpoint stopped
	// starting attempts when it let p go. The attempts count against the
	// first lease when it comes. nil means never: a grain waits for its
	// tenant's answer before its first attempt.
	ProvisionalLease func(p events.Partition) bool
	// StillRunning returns the attempts (and pull leases) of an endpoint
	// that may still run on a member that served its partition before this
	// node: those the record that gave this node the partition lists (nil,
	// or none: nothing to wait for). The grain attempts none of
	// their deliveries before Outcomes shows their outcome applied, or
	// before the attempt's Until has passed; they count against the
	// endpoint's in-flight limit meanwhile.
	StillRunning func(endpointID string) []Running
	// Outcomes tells whether those outcomes are applied, and wakes the
	// grain when they are (*due.Due); required with StillRunning.
	Outcomes Outcomes
	// History is the history projection (*history.History), where replay
	// finds a delivery's endpoint and recovery lists failed deliveries.
	History History
	// Attempts runs one HTTP attempt (*attempt.Client).
	Attempts Attempter
	// Dispatcher shares the node's attempt slots among tenants
	// (*dispatch.Dispatcher, one per node); nil means no node-wide limit.
	Dispatcher Dispatcher
	// Grains reaches the tenant grain for quota leases (*cluster.Node); nil
	// means no tenant quota.
	Grains Grains
	// Schedule decides retries; its zero value is attempt's defaults (base
	// 5 s, cap 1 h, 15 attempts). The deadline of a delivery is its
	// expires_at when known, else planned + Schedule.Deadline (24 h); an
	// endpoint's max_attempts overrides MaxAttempts.
	Schedule attempt.Schedule
	// Jitter returns values in [0, 1) for the schedule's full jitter; nil
	// means math/rand/v2.
	Jitter func() float64
	// Breaker configures the circuit breaker; zero fields mean its defaults.
	Breaker BreakerConfig
	// RatePerSecond and Burst are the endpoint's token bucket when its
	// configuration leaves them 0; 0 here means DefaultRatePerSecond (50)
	// and DefaultBurst (50).
	RatePerSecond float64
	Burst         int
	// MaxInFlight bounds an endpoint's concurrent attempts when its
	// configuration leaves it 0; 0 here means DefaultMaxInFlight (10).
	MaxInFlight int
	// Drain, shared by the node's endpoint grains, stops new attempts when
	// the node stops gracefully; nil never drains.
	Drain *Drain
	// Quarantine, shared by the node's endpoint grains, makes a new
	// activation wait before attempting when this node's previous one lost
	// ownership; nil means no waiting (fencing alone).
	Quarantine *Quarantine
	// PullLimit is how many due deliveries one pull asks for (beyond those
	// the grain holds); 0 means DefaultPullLimit (100).
	PullLimit int
	// Spans, if set, exports every attempt as a span of its trace once its
	// outcome is durable, and makes the attempts of events published
	// without a traceparent carry the sampled flag; nil exports nothing.
	Spans Spans
	// Tasks, if set, counts every goroutine the grains' delivery loops
	// start (reads, attempts, appends, pulls). They end soon after their
	// grain stops; a node that stopped its actor system waits on Tasks
	// before closing the log and the projections. Nil means none is kept.
	Tasks *sync.WaitGroup

	// events caches published events for the grains of one Props (set by
	// Props; nil reads every event from the log).
	events *eventCache
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	var errs []error
	if c.Log == nil {
		errs = append(errs, errors.New("endpoint: config: log is required; set Config.Log to the node's event log"))
	}
	if c.Keyring == nil {
		errs = append(errs, errors.New("endpoint: config: keyring is required; set Config.Keyring (seal.LoadKeyring)"))
	}
	if c.StillRunning != nil && c.Outcomes == nil {
		errs = append(errs, errors.New("endpoint: config: StillRunning needs Outcomes, which tells when their outcomes are applied; set Config.Outcomes to the due projection"))
	}
	if c.Due != nil && (c.Projections == nil || c.History == nil || c.Attempts == nil || c.Sequences == nil) {
		errs = append(errs, errors.New("endpoint: config: the delivery loop (Due) needs Projections, History, Attempts and Sequences; set them, or leave Due nil to turn the loop off"))
	}
	if c.RatePerSecond < 0 || c.Burst < 0 || c.MaxInFlight < 0 || c.PullLimit < 0 {
		errs = append(errs, errors.New("endpoint: config: rate, burst, max in flight and pull limit must not be negative; use 0 for the defaults"))
	}
	if err := c.Schedule.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.IOTimeout < 0 || c.LeaseTimeout < 0 || c.ReadPage < 0 || c.DefaultOverlap < 0 || c.DefaultOverlap > MaxOverlap || c.IdleAfter < 0 || c.EventRetention < 0 {
		errs = append(errs, errors.New("endpoint: config: durations and sizes must not be negative, nor the default overlap over 30 days; use 0 for the defaults"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Jitter == nil {
		c.Jitter = mrand.Float64
	}
	c.Policy = cmp.Or(c.Policy, &attempt.Policy{})
	c.Rand = cmp.Or(c.Rand, rand.Reader)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.IOTimeout = cmp.Or(c.IOTimeout, DefaultIOTimeout)
	c.LeaseTimeout = cmp.Or(c.LeaseTimeout, DefaultLeaseTimeout)
	c.ReadPage = cmp.Or(c.ReadPage, DefaultReadPage)
	c.DefaultOverlap = cmp.Or(c.DefaultOverlap, DefaultOverlap)
	c.IdleAfter = cmp.Or(c.IdleAfter, DefaultIdleAfter)
	c.EventRetention = cmp.Or(c.EventRetention, DefaultEventRetention)
	c.RatePerSecond = cmp.Or(c.RatePerSecond, DefaultRatePerSecond)
	c.Burst = cmp.Or(c.Burst, DefaultBurst)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.PullLimit = cmp.Or(c.PullLimit, DefaultPullLimit)
	c.Breaker = c.Breaker.withDefaults()
	return c
}
