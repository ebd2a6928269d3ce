package node

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// waker sends Wake hints to endpoint grains for the due projection. Wake
// never blocks: endpoints are collected in a set (a burst of wakes for one
// endpoint costs one message) and a few workers deliver them. A lost hint
// costs at most the due projection's sweep bound, never a delivery. An
// endpoint that heldBack reports (paused or disabled) is not woken: its
// grain holds and attempts nothing until it resumes, and would only be
// activated (or kept from passivating) for nothing; the resume itself
// makes it pull.
type waker struct {
	mu       sync.Mutex // guards pending, order and node
	pending  map[string]struct{}
	order    []string
	node     *cluster.Node
	signal   chan struct{}
	logger   *slog.Logger
	heldBack func(endpointID string) bool // nil: none
	// sent and skipped count the wakes delivered (or tried) and those held
	// back, for metrics.
	sent, skipped atomic.Int64
}

// wakeTimeout bounds the delivery of one hint.
const wakeTimeout = 500 * time.Millisecond

// wakeWorkers is how many hints are delivered at once.
const wakeWorkers = 16

func newWaker(logger *slog.Logger, heldBack func(endpointID string) bool) *waker {
	return &waker{pending: map[string]struct{}{}, signal: make(chan struct{}, 1), logger: logger, heldBack: heldBack}
}

// heldBack reports whether waking endpointID would be wasted: the registry
// has it paused or disabled. A deleted endpoint is woken: its grain ends
// its due deliveries. When the registry cannot tell, the wake goes.
func (s *Server) heldBack(endpointID string) bool {
	e, ok, err := s.registry.Endpoint(endpointID)
	return err == nil && ok && !e.Deleted && (e.Paused || e.Disabled)
}

// Wake asks for a Wake to be sent to endpointID's grain.
func (w *waker) Wake(endpointID string) {
	w.mu.Lock()
	if _, ok := w.pending[endpointID]; !ok {
		w.pending[endpointID] = struct{}{}
		w.order = append(w.order, endpointID)
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *waker) setNode(n *cluster.Node) {
	w.mu.Lock()
	w.node = n
	w.mu.Unlock()
	w.Wake("") // flush what arrived before the node existed
}

// next takes the oldest pending endpoint.
func (w *waker) next() (string, *cluster.Node, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.node != nil && len(w.order) > 0 {
		id := w.order[0]
		w.order = w.order[1:]
		delete(w.pending, id)
		if id != "" {
			return id, w.node, true
		}
	}
	return "", nil, false
}

// Run delivers hints with workers until ctx ends.
func (w *waker) Run(ctx context.Context, workers int) error {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id, node, ok := w.next()
				if !ok {
					select {
					case <-ctx.Done():
						return
					case <-w.signal:
						continue
					}
				}
				// Another worker may be waiting on the signal we consumed.
				select {
				case w.signal <- struct{}{}:
				default:
				}
				if w.heldBack != nil && w.heldBack(id) {
					w.skipped.Add(1)
					continue
				}
				w.sent.Add(1)
				// A wake is a hint: a short timeout keeps a dead member's
				// grains from holding up the wakes of healthy endpoints
				// (the sweeper repeats what is lost).
				rctx, cancel := context.WithTimeout(ctx, wakeTimeout)
				err := node.Tell(rctx, "endpoint", id, &internalv1.EndpointCommand{Command: &internalv1.EndpointCommand_Wake{Wake: &internalv1.Wake{}}})
				cancel()
				if err != nil && ctx.Err() == nil {
					w.logger.Debug("wake not delivered; the sweeper will retry", slog.String("endpoint_id", id), slog.Any("error", err))
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}
