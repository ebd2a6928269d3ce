package seal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// RegistryStream is the stream that records which master keys the log's
// secrets may be sealed under (MasterKeyRegistered) and which no live
// secret uses any more (MasterKeyRetired). Its writers are the nodes at
// start ([CheckLog], registering their current key before they seal
// anything) and the reseal ([RetireOthers]); they append with the revision
// they read and, on a wrong revision, read again and decide again: every
// event they write is idempotent.
const RegistryStream = "keyring-master"

// Sentinel errors of [CheckLog].
var (
	// ErrMissingKey means the log may hold secrets sealed under a master
	// key that this node does not hold: they would not open here, and
	// every attempt of their endpoints would fail.
	ErrMissingKey = errors.New("seal: this node lacks a master key the log's secrets use")
	// ErrKeyMismatch means a key this node holds has the id of a
	// registered key but is another key.
	ErrKeyMismatch = errors.New("seal: a master key is not the key the log knows by its id")
	// ErrRetiredKey means this node's current key was retired by a
	// reseal: it would seal new secrets under a key the others may drop.
	ErrRetiredKey = errors.New("seal: the current master key is retired")
)

// checkPlain is what a registration seals, under the key it registers.
var checkPlain = []byte("hookline master key check")

func checkAAD(keyID string) []byte { return []byte("masterkey/" + keyID + "/check") }

// registry is RegistryStream as read.
type registry struct {
	checks  map[string]*hooklinev1.MasterKeyRegistered
	retired map[string]bool
	order   []string // key ids in order of registration
	last    events.Revision
	exists  bool
}

func readRegistry(ctx context.Context, log events.Log) (*registry, error) {
	r := &registry{checks: map[string]*hooklinev1.MasterKeyRegistered{}, retired: map[string]bool{}}
	const page = 256
	for from := events.Revision(0); ; {
		recs, err := log.ReadStream(ctx, RegistryStream, events.Forwards, from, page)
		if errors.Is(err, events.ErrStreamNotFound) {
			return r, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", RegistryStream, err)
		}
		for i := range recs {
			msg, err := events.Decode(&recs[i])
			if err != nil {
				return nil, err
			}
			switch m := msg.(type) {
			case *hooklinev1.MasterKeyRegistered:
				if _, ok := r.checks[m.GetKeyId()]; !ok {
					r.order = append(r.order, m.GetKeyId())
				}
				r.checks[m.GetKeyId()] = m
				delete(r.retired, m.GetKeyId())
			case *hooklinev1.MasterKeyRetired:
				r.retired[m.GetKeyId()] = true
			}
			r.last, r.exists = recs[i].Revision, true
		}
		if len(recs) < page {
			return r, nil
		}
		from = r.last + 1
	}
}

// live returns the registered keys that are not retired.
func (r *registry) live() []string {
	var ids []string
	for _, id := range r.order {
		if !r.retired[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// CheckLog checks, at a node's start, that kr opens every secret the log
// may hold, and registers kr's current key: every master key registered in
// RegistryStream and not retired must be in kr and be the same key (its
// check value opens); kr's current key must not be retired. Then the
// current key is registered if it is not, before the node seals anything
// under it. It returns an error wrapping [ErrMissingKey],
// [ErrKeyMismatch] or [ErrRetiredKey] that names the keys by id, and how
// to fix the configuration.
//
// Logs written before the registry existed hold secrets sealed under keys
// no node registered; the first node to start registers its own.
func CheckLog(ctx context.Context, log events.Log, kr *Keyring, now time.Time) error {
	for try := 0; ; try++ {
		r, err := readRegistry(ctx, log)
		if err != nil {
			return err
		}
		var missing []string
		for _, id := range r.live() {
			reg := r.checks[id]
			if !kr.Has(id) {
				missing = append(missing, id)
				continue
			}
			if _, err := kr.Open(id, reg.GetNonce(), reg.GetCheck(), checkAAD(id)); err != nil {
				return fmt.Errorf("%w: the key given as %s opens nothing sealed under the log's %s; give the cluster's key under that id", ErrKeyMismatch, id, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: secrets in the log may be sealed under %s, which this node does not hold: give every node the same %s (the current key first, then the older ones)",
				ErrMissingKey, strings.Join(missing, ", "), EnvVar)
		}
		current := kr.CurrentID()
		if r.retired[current] {
			return fmt.Errorf("%w: %s was retired by a reseal; put the key that replaced it first in %s", ErrRetiredKey, current, EnvVar)
		}
		if _, ok := r.checks[current]; ok {
			return nil
		}
		ev, err := registration(kr, now)
		if err != nil {
			return err
		}
		_, err = log.Append(ctx, RegistryStream, events.ExpectAfter(r.last, r.exists), ev)
		if err == nil {
			return nil
		}
		if !errors.Is(err, events.ErrWrongRevision) || try == 4 {
			return fmt.Errorf("register master key %s: %w", current, err)
		}
		// Another node wrote first: read again and decide again.
	}
}

func registration(kr *Keyring, now time.Time) (events.Event, error) {
	id, nonce, check, err := kr.Seal(checkPlain, checkAAD(kr.CurrentID()))
	if err != nil {
		return events.Event{}, err
	}
	return events.Encode(&hooklinev1.MasterKeyRegistered{KeyId: id, Nonce: nonce, Check: check, At: timestamppb.New(now)},
		"masterkey/registered/"+id, RegistryStream)
}

// RetireOthers records that every registered master key but kr's current
// one is retired: call it once every live secret is sealed under the
// current key. It returns the ids it retired (none when there were none to
// retire).
func RetireOthers(ctx context.Context, log events.Log, kr *Keyring, by *hooklinev1.Actor, now time.Time) ([]string, error) {
	for try := 0; ; try++ {
		r, err := readRegistry(ctx, log)
		if err != nil {
			return nil, err
		}
		var ids []string
		var evs []events.Event
		for _, id := range r.live() {
			if id == kr.CurrentID() {
				continue
			}
			ev, err := events.Encode(&hooklinev1.MasterKeyRetired{KeyId: id, IssuedBy: by, At: timestamppb.New(now)},
				fmt.Sprintf("masterkey/retired/%s/%d", id, r.last), RegistryStream)
			if err != nil {
				return nil, err
			}
			ids, evs = append(ids, id), append(evs, ev)
		}
		if len(evs) == 0 {
			return nil, nil
		}
		_, err = log.Append(ctx, RegistryStream, events.ExpectAfter(r.last, r.exists), evs...)
		if err == nil {
			slices.Sort(ids)
			return ids, nil
		}
		if !errors.Is(err, events.ErrWrongRevision) || try == 4 {
			return nil, fmt.Errorf("retire master keys: %w", err)
		}
	}
}
