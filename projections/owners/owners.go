// Package owners is the cluster's partition table as the log records it:
// which member serves each delivery partition, since which position, and
// why (PartitionsAssigned events of stream events.OwnersStream). Every node
// applies it, like the registry, so every node learns of a change at the
// same place among the records it applies: a member that is handed a
// partition has applied every record of that partition that came before.
//
// The node's partition manager (package node) writes the table and reads
// it; the cluster places endpoint grains by it.
package owners

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Name is the projection's name.
const Name = "owners"

// Owner is who serves one partition, as of the last PartitionsAssigned that
// named it.
type Owner struct {
	// Address is the member's address; "" when no member was ever named.
	Address string
	// Previous is the member that served it before.
	Previous string
	// Since is the position of the event that named it.
	Since  events.Position
	Reason hooklinev1.PartitionsAssigned_Reason
	At     time.Time
	// Running are the attempts of the partition that may still run on a
	// member that served it before, as the record that named Address lists
	// them (a HANDOVER: those Previous still ran and those it held for its
	// own predecessors; a FAILOVER: those the member that left held): their
	// deliveries wait for their outcomes on the new owner.
	Running []Running `json:",omitempty"`
}

// Running is an attempt (or a pull lease) a member may still run after its
// partition moved on.
type Running struct {
	EndpointID, DeliveryID string
	Attempt                int32
	Until                  time.Time
}

// Table is the partition table at one position of the log.
type Table struct {
	// Owners is indexed by partition; index 0 (NoPartition) is unused.
	Owners [events.Partitions + 1]Owner
	// Revision is the stream's revision after the last event applied;
	// Exists is false while the stream has none. Writers append with them
	// as the expected revision.
	Revision events.Revision
	Exists   bool
}

// Expected is the expected revision of the next append to the table.
func (t *Table) Expected() events.ExpectedRevision {
	return events.ExpectAfter(t.Revision, t.Exists)
}

// Owners is the projection. Register it with [New]; Table and Changed are
// safe for concurrent use with the runner.
type Owners struct {
	store *projections.Store
	table atomic.Pointer[Table] // as of the last batch; never changed in place

	mu      sync.Mutex    // guards changed
	changed chan struct{} // closed and replaced when the table changes
}

// New registers an Owners projection with r and loads the table it holds.
func New(r *projections.Runner) (*Owners, error) {
	o := &Owners{changed: make(chan struct{})}
	s, err := r.Register(o)
	if err != nil {
		return nil, err
	}
	o.store = s
	t := &Table{}
	v, ok, err := s.Get(tableKey)
	if err != nil {
		return nil, fmt.Errorf("owners: load the table: %w", err)
	}
	if ok {
		if err := json.Unmarshal(v, t); err != nil {
			return nil, fmt.Errorf("owners: decode the table: %w", err)
		}
	}
	o.table.Store(t)
	return o, nil
}

var tableKey = []byte("t")

// Name implements [projections.Projection].
func (*Owners) Name() string { return Name }

// Filter implements [projections.Projection].
func (*Owners) Filter() events.Filter {
	return events.Filter{StreamPrefixes: []string{events.OwnersStream}, Types: []string{"PartitionsAssigned"}}
}

// Apply implements [projections.Projection].
func (o *Owners) Apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	m, ok := msg.(*hooklinev1.PartitionsAssigned)
	if !ok || rec.Stream != events.OwnersStream {
		return nil
	}
	// The table as this batch left it (a batch may hold several changes).
	var t Table
	if v, ok, err := b.Get(tableKey); err != nil {
		return err
	} else if ok {
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("owners: decode the table: %w", err)
		}
	}
	running := map[events.Partition][]Running{}
	for _, r := range m.GetRunning() {
		p := events.PartitionOf(r.GetEndpointId())
		running[p] = append(running[p], Running{EndpointID: r.GetEndpointId(), DeliveryID: r.GetDeliveryId(), Attempt: r.GetAttempt(), Until: r.GetUntil().AsTime()})
	}
	for _, p := range m.GetPartitions() {
		if part := events.Partition(p); part.Valid() {
			t.Owners[part] = Owner{Address: m.GetOwner(), Previous: m.GetPrevious(), Since: rec.Position, Reason: m.GetReason(), At: m.GetAt().AsTime(), Running: running[part]}
		}
	}
	t.Revision, t.Exists = rec.Revision, true
	v, err := json.Marshal(&t)
	if err != nil {
		return err
	}
	if err := b.Set(tableKey, v); err != nil {
		return err
	}
	b.OnCommit(func() {
		o.table.Store(&t)
		o.mu.Lock()
		close(o.changed)
		o.changed = make(chan struct{})
		o.mu.Unlock()
	})
	return nil
}

// Table returns the table as of the last batch applied; the caller must
// not change it.
func (o *Owners) Table() *Table { return o.table.Load() }

// Owner returns the address of partition p's owner as of the last batch
// applied; "" when none was ever named.
func (o *Owners) Owner(p events.Partition) string {
	if !p.Valid() {
		return ""
	}
	return o.table.Load().Owners[p].Address
}

// Changed returns a channel closed at the next change of the table.
func (o *Owners) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}
