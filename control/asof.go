package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// moment is a point of the log that an as-of read folds a stream up to:
// a time (records recorded at or before it) or a position (records at or
// before it).
type moment struct {
	at    time.Time
	pos   events.Position
	byPos bool
}

// includes reports whether rec happened at or before m.
func (m moment) includes(rec *events.Record) bool {
	if m.byPos {
		return !m.pos.Less(rec.Position)
	}
	return !rec.Recorded.After(m.at)
}

// parseMoment reads an as_of: an RFC 3339 time, or a log position as the
// audit browser shows it ("1234", "1234/1230") or as its cursors carry it
// ("1234.1230").
func parseMoment(field, s string) (moment, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return moment{at: t}, nil
	}
	commit, prepare, two := strings.Cut(s, "/")
	if !two {
		commit, prepare, two = strings.Cut(s, ".")
	}
	c, err := strconv.ParseUint(commit, 10, 64)
	if err == nil && two {
		var p uint64
		if p, err = strconv.ParseUint(prepare, 10, 64); err == nil {
			return moment{pos: events.Position{Commit: c, Prepare: p}, byPos: true}, nil
		}
	} else if err == nil {
		return moment{pos: events.Position{Commit: c, Prepare: c}, byPos: true}, nil
	}
	return moment{}, invalid(field, "%q is neither an RFC 3339 time (2026-11-24T10:00:00Z) nor a log position (1234, as the audit browser shows it)", s)
}

// asOfPage is how many records an as-of read takes at a time.
const asOfPage = 500

// foldStream reads stream from its start and hands fn every record at or
// before m, decoded, in order; it returns the last record handed and how
// many.
// A stream that does not exist hands nothing.
func (s *Server) foldStream(ctx context.Context, stream string, m moment, fn func(*events.Record, proto.Message)) (last *events.Record, n int64, err error) {
	from := events.Revision(0)
	for {
		recs, err := s.cfg.Log.ReadStream(ctx, stream, events.Forwards, from, asOfPage)
		if errors.Is(err, events.ErrStreamNotFound) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", stream, err)
		}
		for i := range recs {
			r := &recs[i]
			if !m.includes(r) {
				return last, n, nil
			}
			msg, err := events.Decode(r)
			if err != nil {
				return nil, 0, err
			}
			fn(r, msg)
			last, n = r, n+1
		}
		if len(recs) < asOfPage {
			return last, n, nil
		}
		from = recs[len(recs)-1].Revision + 1
	}
}

// asOfView says which moment an as-of read shows.
func asOfView(last *events.Record, n int64) *controlv1.AsOf {
	return &controlv1.AsOf{Position: last.Position.String(), RecordedAt: timestamppb.New(last.Recorded), Events: n}
}

// endpointAsOf folds the endpoint's stream up to m: the endpoint as it was
// then, with the secret versions live then (never a secret).
func (s *Server) endpointAsOf(ctx context.Context, tenantID, endpointID, asOf string) (*controlv1.Endpoint, error) {
	if err := checkID("endpoint_id", endpointID); err != nil {
		return nil, err
	}
	m, err := parseMoment("as_of", asOf)
	if err != nil {
		return nil, err
	}
	var st endpoint.State
	last, n, err := s.foldStream(ctx, events.EndpointStream(endpointID), m, func(_ *events.Record, msg proto.Message) { st.Apply(msg) })
	if err != nil {
		return nil, err
	}
	if last == nil || !st.Created {
		if ok, err := s.endpointOfTenant(endpointID, tenantID); err != nil || !ok {
			return nil, notFoundEndpoint(endpointID, err)
		}
		return nil, status.Errorf(codes.NotFound, "endpoint_id %q did not exist yet at %s", endpointID, asOf)
	}
	if st.TenantID != tenantID {
		return nil, notFoundEndpoint(endpointID, nil)
	}
	v := st.View()
	// A previous secret whose overlap had ended was no longer live, even
	// if its SecretRetired was written later (the grain retires lazily).
	then := m.at
	if m.byPos {
		then = last.Recorded
	}
	live := v.Secrets[:0]
	for _, sec := range v.GetSecrets() {
		if sec.GetExpiresAt() == nil || sec.GetExpiresAt().AsTime().After(then) {
			live = append(live, sec)
		}
	}
	v.Secrets = live
	v.AsOf = asOfView(last, n)
	return v, nil
}

// endpointOfTenant reports whether the registry knows endpointID as one
// of tenantID's.
func (s *Server) endpointOfTenant(endpointID, tenantID string) (bool, error) {
	e, ok, err := s.cfg.Registry.Endpoint(endpointID)
	return ok && e.TenantID == tenantID, err
}

func notFoundEndpoint(id string, err error) error {
	if err != nil {
		return err
	}
	return status.Errorf(codes.NotFound, "endpoint_id %q: no such endpoint for this tenant", id)
}

// tenantAsOf folds the tenant's stream up to m: its name, quota and API
// keys (never a key) as they were then.
func (s *Server) tenantAsOf(ctx context.Context, tenantID, asOf string) (*controlv1.Tenant, error) {
	m, err := parseMoment("as_of", asOf)
	if err != nil {
		return nil, err
	}
	var st tenant.State
	last, n, err := s.foldStream(ctx, events.TenantStream(tenantID), m, func(_ *events.Record, msg proto.Message) { st.Apply(msg) })
	if err != nil {
		return nil, err
	}
	if last == nil || !st.Created {
		return nil, status.Errorf(codes.NotFound, "tenant_id %q did not exist at %s", tenantID, asOf)
	}
	v := st.View()
	v.AsOf = asOfView(last, n)
	return v, nil
}
