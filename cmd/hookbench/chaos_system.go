package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chaosSystem is what a chaos run acts on: one node on the embedded log,
// or a cluster on a PostgreSQL server of the run's own. Its methods are
// safe for concurrent use; the process lane is the only caller of those
// that stop and start nodes.
type chaosSystem struct {
	cluster *Cluster         // nil: one node
	single  *Node            // the one node, when not a cluster
	pg      *privatePostgres // the cluster's server
	// retention is the embedded node's --retention: each of its starts
	// drops the event and delivery streams last written before it.
	retention time.Duration

	mu     sync.Mutex // guards the fields below
	nodes  []*Node
	apis   []*API
	up     []bool
	starts []time.Time // every start of a node after the first
	rr     int
}

// startChaosSystem starts the nodes of a chaos run: nodes 1 starts one node
// on the embedded log with args; more start a PostgreSQL server and a
// cluster on it.
func startChaosSystem(ctx context.Context, b *Bench, nodes int, retention time.Duration) (*chaosSystem, error) {
	bin, err := b.hooklineBinary(ctx)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--reconcile-every", "10s"}, faultArgs(b.cfg.NodeFaults)...)
	s := &chaosSystem{}
	// A grain that stops after an append of unknown outcome is a window
	// of the ledger, as in the acceptance run: its next activation
	// attempts again what it had in flight.
	stops := &grainStops{ledger: b.ledger}
	if b.cfg.NodeLog {
		stops.next = b.stderr
	}
	log := io.Writer(stops)
	if nodes == 1 {
		dir, err := os.MkdirTemp("", "hookbench-chaos-")
		if err != nil {
			return nil, err
		}
		s.retention = retention
		args = append(args, "--retention", retention.String())
		n, api, err := StartDialed(ctx, NodeConfig{Binary: bin, DataDir: filepath.Join(dir, "data"), AdminToken: "hb_" + randomHex(16), Log: log, Args: args})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.single, s.nodes, s.apis, s.up = n, []*Node{n}, []*API{api}, []bool{true}
		b.cfg.Token = n.cfg.AdminToken
		return s, nil
	}
	if s.pg, err = startPrivatePostgres(ctx); err != nil {
		return nil, err
	}
	c, err := StartCluster(ctx, ClusterConfig{Nodes: nodes, DSN: s.pg.DSN(), Binary: bin, Log: log, Args: args})
	if err != nil {
		s.pg.close()
		return nil, err
	}
	s.cluster, s.nodes, s.apis, b.cfg.Token = c, slices.Clone(c.Nodes), slices.Clone(c.APIs), c.Token
	s.up = make([]bool, nodes)
	for i := range s.up {
		s.up[i] = true
	}
	return s, nil
}

// close stops every node and the database, and removes their files.
func (s *chaosSystem) close(ctx context.Context) error {
	if s.cluster != nil {
		err := s.cluster.Close(ctx)
		s.pg.close()
		return err
	}
	s.apis[0].Close()
	err := s.single.Stop(30 * time.Second)
	return errors.Join(err, os.RemoveAll(filepath.Dir(s.single.DataDir())))
}

// stop stops every node (SIGTERM), keeping their files: the end of the
// run, before its files are read.
func (s *chaosSystem) stop() error {
	if s.cluster != nil {
		return s.cluster.Stop(30 * time.Second)
	}
	return s.single.Stop(30 * time.Second)
}

// dirs are the directories whose files hold what the run stored: the
// nodes' data directories and the database's.
func (s *chaosSystem) dirs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.nodes {
		out = append(out, n.DataDir())
	}
	if s.pg != nil {
		out = append(out, s.pg.dir)
	}
	return out
}

// live returns the APIs of the nodes up, the next one first (calls
// spread over them).
func (s *chaosSystem) live() []*API {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*API
	for i := range s.apis {
		j := (s.rr + i) % len(s.apis)
		if s.up[j] {
			out = append(out, s.apis[j])
		}
	}
	s.rr++
	return out
}

// count is the number of nodes started so far (a member that joined
// included).
func (s *chaosSystem) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.nodes)
}

// isUp reports whether node i is up.
func (s *chaosSystem) isUp(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up[i]
}

func (s *chaosSystem) setUp(i int, up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up[i] = up
	if up {
		s.starts = append(s.starts, time.Now())
	}
}

// restarts returns the times nodes were started again.
func (s *chaosSystem) restarts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.starts...)
}

// callTries bounds how long call goes on trying: minutes of nodes and a
// database restarting.
const callTries = 90 * time.Second

// call calls f with the API of a node up, and again with another while
// the answer says that no node could serve it (unavailable, a deadline, a
// restart under way), for at most callTries. The last error is returned:
// a call that ended in one of those may or may not have been carried out.
func (s *chaosSystem) call(ctx context.Context, f func(ctx context.Context, api *API) error) error {
	deadline := time.Now().Add(callTries)
	for {
		var err error
		for _, api := range s.live() {
			if err = f(ctx, api); !retryable(err) {
				return err
			}
		}
		if err == nil {
			err = errors.New("no node is up")
		}
		if time.Now().After(deadline) {
			return err
		}
		if serr := sleepCtx(ctx, 250*time.Millisecond); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// retryable reports whether err says that the call reached no node able
// to serve it (so it may be tried on another).
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Unknown:
		return err != nil
	}
	return false
}

// kill kills node i with SIGKILL and starts it again after down.
func (s *chaosSystem) kill(ctx context.Context, i int, down time.Duration) error {
	n := s.node(i)
	s.setUp(i, false)
	if err := n.Kill(); err != nil {
		return err
	}
	if err := sleepCtx(ctx, down); err != nil {
		return err
	}
	return s.restart(ctx, i, nil)
}

// term stops node i with SIGTERM (SIGKILL after 30 s) and starts it again;
// with wipe, its projections are removed while it is down (a replaced
// disk: on a cluster its whole data directory, the log being in the
// database; on one node the projections beside its log), so that it
// builds them again from the log.
func (s *chaosSystem) term(ctx context.Context, i int, wipe bool) error {
	n := s.node(i)
	s.setUp(i, false)
	if err := n.Stop(30 * time.Second); err != nil {
		return err
	}
	if !wipe {
		return s.restart(ctx, i, nil)
	}
	return s.restart(ctx, i, func() error {
		if s.cluster != nil {
			return os.RemoveAll(n.DataDir())
		}
		return os.RemoveAll(filepath.Join(n.DataDir(), "projections"))
	})
}

// restart starts node i again on its data (after before, when given),
// waits until it serves and points its API at it.
func (s *chaosSystem) restart(ctx context.Context, i int, before func() error) error {
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	if s.cluster != nil {
		// Roll joins another member and waits for the node to serve; the
		// node is down already, so its stop is a no-op.
		if err := s.cluster.Roll(ctx, i, 30*time.Second); err != nil {
			return err
		}
		s.setUp(i, true)
		if err := s.cluster.waitSettled(ctx, time.Minute); err != nil {
			return fmt.Errorf("node %d restarted, the cluster not settled: %w", i+1, err)
		}
		return nil
	}
	n := s.single
	if err := n.Restart(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := WaitServing(wctx, n.GRPCAddr()); err != nil {
		return err
	}
	if err := s.apis[0].Reconnect(n.GRPCAddr()); err != nil {
		return err
	}
	s.setUp(0, true)
	return nil
}

// join starts one more member, joining the cluster, and waits until the
// partitions are shared with it.
func (s *chaosSystem) join(ctx context.Context) error {
	if s.cluster == nil {
		return errors.New("join: one node on the embedded log has no cluster to join")
	}
	api, err := s.cluster.Join(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.nodes, s.apis, s.up = append(s.nodes, s.cluster.Nodes[len(s.cluster.Nodes)-1]), append(s.apis, api), append(s.up, true)
	s.mu.Unlock()
	return s.cluster.waitSettled(ctx, 2*time.Minute)
}

// restartPG crashes the database and starts it again.
func (s *chaosSystem) restartPG(ctx context.Context) error {
	if s.pg == nil {
		return errors.New("pg-restart: one node on the embedded log has no PostgreSQL")
	}
	_, err := s.pg.restart(ctx)
	return err
}

// node returns node i.
func (s *chaosSystem) node(i int) *Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[i]
}
