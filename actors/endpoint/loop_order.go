package endpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// Ordered deliveries' sequences. The due index hands the grain each
// ordering key's head (projections/due/order.go), and the grain numbers
// it when it first sends it: one more than the last sequence the key was
// ever sent with, which the index counts by the key's token
// (Sequences.LastSent). A delivery sent before keeps its sequence for its
// retries and replays (its stream says it); a replay of a delivery that
// never had its turn carries its key and no sequence. Every attempt with
// a sequence records it with the key's token, and the grain writes the
// counts the index has not seen checkpointed to the endpoint's ordering
// stream, which never expires (loop_checkpoint.go): the counts survive the
// attempts that retention drops (ADR 0064).

// Sequences counts the sequences of the endpoint's ordering keys;
// *due.Due satisfies it.
type Sequences interface {
	LastSent(tenantID, endpointID, key string, token []byte, tokenKey string) (int64, error)
	Unchecked(endpointID string, limit int) (due.Checkpoint, error)
	CheckpointDue(endpointID string, now time.Time, all bool) bool
}

// ordering is a delivery's ordering key and sequence, as its streams and
// the due index tell them.
type ordering struct {
	key string
	// sent is the sequence its attempts (or a replay) carried: 0 when it
	// was never sent with one.
	sent int64
	// seq is the sequence its next attempt carries, and token and
	// tokenKey its key's token (seal.Payloads.Token) when seq is set.
	seq      int64
	token    []byte
	tokenKey string
}

// sentWith notes an attempt's (or a replay's) key and sequence.
func (o *ordering) sentWith(key string, seq int64) {
	if key != "" {
		o.key = key
	}
	if seq > 0 {
		o.sent = seq
	}
}

// number finds the sequence of a delivery's next attempt, once its
// stream is read into o: the one it was sent with; or, for its key's head
// (it is ordered and due) never sent yet, one more than the key's last.
func (rd reader) number(ctx context.Context, it due.Item, o *ordering) error {
	if o.key == "" {
		o.key = it.OrderingKey
	}
	if o.key == "" {
		return nil
	}
	o.seq = o.sent
	if o.seq == 0 && !(it.Ordered() && !it.Waiting) {
		return nil // not its turn: sent with its key only
	}
	if o.seq == 0 && it.Sequence > 0 && len(it.Token) > 0 && !rd.payloads.Erased(it.TenantID, it.TokenKey) {
		o.seq, o.token, o.tokenKey = it.Sequence, it.Token, it.TokenKey // numbered by the pull
		return nil
	}
	token, tokenKey, err := rd.payloads.Token(ctx, it.TenantID, it.EndpointID, o.key)
	if err != nil {
		return fmt.Errorf("token of the ordering key of %s: %w", it.DeliveryID, err)
	}
	o.token, o.tokenKey = token, tokenKey
	if o.seq > 0 {
		return nil
	}
	if rd.seqs == nil {
		return errors.New("endpoint: no sequence counter for an ordered delivery; set Config.Sequences")
	}
	last, err := rd.seqs.LastSent(it.TenantID, it.EndpointID, o.key, token, tokenKey)
	if err != nil {
		return fmt.Errorf("last sequence of the ordering key of %s: %w", it.DeliveryID, err)
	}
	o.seq = last + 1
	return nil
}

// numbered takes the sequence and token a new head came with from the due
// index (due.Due.Pull numbers the heads it returns), unless the token's
// data key was erased since (payloads says): the head is then sent without
// a read.
func (f *flight) numbered(payloads *seal.Payloads) bool {
	it := &f.item
	if !it.Ordered() || it.Waiting || it.Sequence <= 0 || len(it.Token) == 0 || payloads.Erased(it.TenantID, it.TokenKey) {
		return false
	}
	f.d.ord = ordering{key: it.OrderingKey, seq: it.Sequence, token: it.Token, tokenKey: it.TokenKey}
	return true
}

// ordered sets the ordering the read found on the flight's item, which
// the request and the attempt's record carry.
func (f *flight) ordered() {
	if f.d.ord.key != "" {
		f.item.OrderingKey, f.item.Sequence = f.d.ord.key, f.d.ord.seq
	}
}

// orderingOf fills an attempt's ordering fields: the flight's key, and its
// sequence with its key's token, unless the attempt sent nothing (unsent:
// the sequence it carries, if any, is in its earlier attempts).
func (f *flight) orderingOf(a *hooklinev1.Attempt) {
	a.OrderingKey = f.item.OrderingKey
	if !f.unsent && f.item.Sequence > 0 && f.item.Sequence == f.d.ord.seq && len(f.d.ord.token) > 0 {
		a.Sequence, a.OrderingToken, a.OrderingTokenKey = f.item.Sequence, f.d.ord.token, f.d.ord.tokenKey
	}
}
