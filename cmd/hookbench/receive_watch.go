package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// echoBytes is how much of a request's body an echoing endpoint answers
// with (Behaviour.Echo).
const echoBytes = 64

// Watched is one request the receiver read, as a watcher sees it: where it
// came (the endpoint's path and the host it was sent to), its headers, the
// hash of its body, the answer, and when it arrived and was answered.
type Watched struct {
	Endpoint string
	// Host is the request's Host header: the host of the URL it was sent
	// to (ListenAlso gives the receiver more than one).
	Host   string
	Header http.Header
	Body   uint64
	// Status is the answer: 401 for a signature that did not verify.
	Status            int
	Arrived, Answered time.Time
}

// watcher is told of every request the receiver answers (the chaos run's
// recorder satisfies it). It must not call the receiver.
type watcher interface {
	watched(Watched)
}

// SetWatcher makes w hear of every request from now on (nil: none).
func (r *Receiver) SetWatcher(w watcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watcher = w
}

func (r *Receiver) watch(w Watched) {
	r.mu.Lock()
	to := r.watcher
	r.mu.Unlock()
	if to != nil {
		w.Header = w.Header.Clone()
		to.watched(w)
	}
}

// ListenAlso makes the receiver listen on one more address (another
// loopback host, e.g. 127.0.0.2:0) and serve it like the first, until Run
// ends; it returns the address. Call it while Run runs.
func (r *Receiver) ListenAlso(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("receiver listen %s: %w", addr, err)
	}
	r.also.Add(1)
	go func() {
		defer r.also.Done()
		if err := r.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			r.mu.Lock()
			r.alsoErr = errors.Join(r.alsoErr, err)
			r.mu.Unlock()
		}
	}()
	return ln.Addr().String(), nil
}

// URLAt is the webhook URL of one endpoint on the receiver's address addr
// (Addr, or one ListenAlso gave).
func (r *Receiver) URLAt(addr, endpoint string) string {
	return "http://" + addr + "/e/" + endpoint
}
