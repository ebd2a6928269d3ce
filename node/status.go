package node

import (
	"context"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// statuses is the operator's view of the cluster: it asks every member for
// its figures (itself directly, the others through their status actors)
// and puts them together. It is safe for concurrent use.
type statuses struct {
	srv     *Server
	store   string        // the log's backend, for the view
	timeout time.Duration // per member
}

// Status implements control.Cluster.
func (st *statuses) Status(ctx context.Context) (*controlv1.ClusterStatus, error) {
	node := st.srv.node
	members := node.Members()
	out := &controlv1.ClusterStatus{Partitions: events.Partitions, Store: st.store, At: timestamppb.New(st.srv.cfg.Now())}
	replies := make([]*internalv1.NodeStatusReply, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			if m.Address == node.Address() {
				replies[i] = st.srv.nodeStatus(ctx)
				return
			}
			r, err := ask[*internalv1.NodeStatusReply](ctx, node, m.Address, statusService, &internalv1.NodeStatusQuery{}, st.timeout)
			if err != nil {
				errs[i] = err
				return
			}
			replies[i] = r
		})
	}
	wg.Wait()
	var served events.PartitionSet
	for i, m := range members {
		ns := &controlv1.NodeStatus{}
		if r := replies[i]; r != nil {
			ns = r.GetStatus()
			served = served.Union(events.PartitionSetOfWords(r.GetLive()))
		} else {
			ns.Error = errs[i].Error()
		}
		ns.MemberId, ns.Address, ns.Kinds, ns.Answered = m.ID, m.Address, m.Kinds, m.Address == node.Address()
		out.Nodes = append(out.Nodes, ns)
	}
	out.Unserved = int32(allPartitions().Minus(served).Len())
	return out, nil
}

// nodeStatus is this node's own figures, as /metrics shows them.
func (s *Server) nodeStatus(ctx context.Context) *internalv1.NodeStatusReply {
	ns := &controlv1.NodeStatus{Grains: map[string]int32{}}
	c := pcluster.GetCluster(s.node.ActorSystem())
	for _, k := range []string{control.TenantKind, control.EndpointKind} {
		if ak, ok := c.TryGetClusterKind(k); ok {
			ns.Grains[k] = ak.Count()
		}
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	lag, err := s.runner.Lag(lctx)
	cancel()
	if err != nil {
		ns.Error = "projection lag: " + err.Error()
	}
	ns.ProjectionLagSeconds, ns.ProjectionBehind, ns.ProjectionRecords = lag.Age.Seconds(), lag.Behind, lag.Events
	claimed, live, serving := *s.parts.claimed.Load(), s.runner.Live(), s.runner.Serving()
	serving.Remove(events.NoPartition)
	live.Remove(events.NoPartition)
	ns.PartitionsOwned, ns.PartitionsLive, ns.PartitionsStandby = int32(claimed.Len()), int32(serving.Len()), int32(live.Minus(serving).Len())
	ds := s.due.Stats(s.cfg.Now())
	ns.OldestNewSeconds, ns.OldestRetrySeconds, ns.DueEndpoints = ds.OldestNew.Seconds(), ds.OldestRetry.Seconds(), int32(ds.Endpoints)
	dp := s.dispatch.Stats()
	ns.SlotsUsed, ns.Slots, ns.WaitingNew, ns.WaitingRetry = int32(dp.Used), int32(dp.Slots), int32(dp.Waiting[0]), int32(dp.Waiting[1])
	ns.Throttled = s.throttled()
	return &internalv1.NodeStatusReply{Status: ns, Live: serving.Words()}
}

// serveStatus answers another member's NodeStatusQuery.
func (s *Server) serveStatus(ctx context.Context, msg proto.Message) proto.Message {
	if _, ok := msg.(*internalv1.NodeStatusQuery); ok {
		return s.nodeStatus(ctx)
	}
	return nil
}
