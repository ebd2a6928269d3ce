package endpoint

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// MaxRecoveries is how many recoveries an endpoint remembers (the one
// running, if any, and the last ones finished).
const MaxRecoveries = 20

// Recovery is a bulk recovery as the endpoint stream describes it.
type Recovery struct {
	ID           string
	Since, Until time.Time
	IssuedBy     *hooklinev1.Actor
	StartedAt    time.Time
	// Cursor is where the listing resumes; Found and Requested count the
	// deliveries listed and replayed before it.
	Cursor           string
	Found, Requested int64
	// Statuses and EventTypes are the window's filter (Statuses empty in a
	// recovery recorded before filters: failed). Deliveries and Digest
	// describe its recorded list (Digest empty in a recovery recorded
	// before lists), and Next is the index in it where the run resumes.
	Statuses, EventTypes []string
	Deliveries           int64
	Digest               string
	Next                 int64
	// Ended is set by RecoveryFinished, with its reason and time.
	Ended      hooklinev1.RecoveryFinished_Reason
	FinishedAt time.Time
}

// Running reports whether the recovery has not ended.
func (r Recovery) Running() bool { return r.Ended == hooklinev1.RecoveryFinished_REASON_UNSPECIFIED }

// applyRecovery folds a recovery event into s.
func (s *State) applyRecovery(msg proto.Message) {
	switch e := msg.(type) {
	case *hooklinev1.RecoveryStarted:
		s.Recoveries = append(s.Recoveries, Recovery{
			ID: e.GetRecoveryId(), Since: asTime(e.GetSince()), Until: asTime(e.GetUntil()),
			IssuedBy: e.GetIssuedBy(), StartedAt: asTime(e.GetAt()),
			Statuses: e.GetStatuses(), EventTypes: e.GetEventTypes(), Deliveries: e.GetDeliveries(), Digest: e.GetDigest(),
			Found: e.GetDeliveries(),
		})
		if n := len(s.Recoveries) - MaxRecoveries; n > 0 {
			s.Recoveries = slices.Delete(s.Recoveries, 0, n)
		}
	case *hooklinev1.RecoveryProgressed:
		if r := s.recovery(e.GetRecoveryId()); r != nil {
			r.Cursor, r.Found, r.Requested, r.Next = e.GetCursor(), e.GetFound(), e.GetRequested(), e.GetNext()
		}
	case *hooklinev1.RecoveryFinished:
		if r := s.recovery(e.GetRecoveryId()); r != nil {
			r.Ended, r.FinishedAt, r.Found, r.Requested = e.GetReason(), asTime(e.GetAt()), e.GetFound(), e.GetRequested()
		}
	}
}

func (s *State) recovery(id string) *Recovery {
	for i := range s.Recoveries {
		if s.Recoveries[i].ID == id {
			return &s.Recoveries[i]
		}
	}
	return nil
}

// Recovery returns the recovery id, if the endpoint remembers it.
func (s *State) Recovery(id string) (Recovery, bool) {
	if r := s.recovery(id); r != nil {
		return *r, true
	}
	return Recovery{}, false
}

// RunningRecovery returns the recovery that has not ended, if any.
func (s *State) RunningRecovery() (Recovery, bool) {
	for _, r := range s.Recoveries {
		if r.Running() {
			return r, true
		}
	}
	return Recovery{}, false
}
