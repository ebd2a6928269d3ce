package node

import (
	"github.com/asynkron/protoactor-go/actor"
)

// SilenceRetention stops s's retention service, as a member of an older
// build that does not know HistoryEnds has none: the other members' asks
// go unanswered. It returns what starts the service again.
func (s *Server) SilenceRetention() (restore func() error, err error) {
	sys := s.node.ActorSystem()
	if err := sys.Root.StopFuture(actor.NewPID(sys.Address(), retentionService)).Wait(); err != nil {
		return nil, err
	}
	return func() error { return s.node.Serve(retentionService, s.node.RequestTimeout(), s.serveEnds) }, nil
}
