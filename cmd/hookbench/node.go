package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NodeConfig says how to start a Hookline node.
type NodeConfig struct {
	// Binary is the hookline executable. Required (see BuildNode).
	Binary string
	// DataDir is the node's data directory. Required.
	DataDir string
	// AdminToken is given to the node as HOOKLINE_ADMIN_TOKEN. Required.
	AdminToken string
	// StartTimeout bounds the wait for the "hookline serving" line; 0 means 60 s.
	StartTimeout time.Duration
	// Log, when set, receives the node's log lines.
	Log io.Writer
	// Args are added to the serve command line (--store, --join, ...).
	Args []string
	// Env is added to the node's environment (HOOKLINE_MASTER_KEY=...).
	Env []string
}

// Node is a running `hookline serve` on loopback ports chosen by the system,
// started again on the same data directory by Restart. Its resource use is
// summed over every process it ran. Methods are safe for concurrent use.
type Node struct {
	cfg NodeConfig

	mu       sync.Mutex // guards every field below
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has been waited for
	grpcAddr string
	httpAddr string
	gossip   string   // memberlist address of the current process
	tail     []string // the last log lines, for errors
	past     Usage    // summed over the processes that ended
	starts   int
	// bound are the addresses the first process was given by the system:
	// later processes of the node listen on the same ones, as a node
	// restarted in a rolling upgrade or after a crash does (a member's
	// address is its place in the partitions' ranking).
	bound boundAddrs
}

// boundAddrs are a node's listening addresses; empty until learnt.
type boundAddrs struct{ grpc, http, cluster, gossip string }

// flags returns serve's address flags: the addresses learnt, or a port the
// system chooses for each not learnt yet.
func (a boundAddrs) flags() []string {
	or := func(s string) string { return cmp.Or(s, "127.0.0.1:0") }
	return []string{"--grpc-addr", or(a.grpc), "--http-addr", or(a.http),
		"--cluster-addr", or(a.cluster), "--gossip-addr", or(a.gossip)}
}

var (
	servingLine = regexp.MustCompile(`hookline serving" grpc_addr=(\S+) http_addr=(\S+)`)
	startedLine = regexp.MustCompile(`msg="cluster node started" .*\saddress=(\S+) gossip_address=(\S+)`)
	// busyLine names an address another process took while the node was
	// down (the system may give a port the node freed to anyone).
	busyLine = regexp.MustCompile(`listen (?:tcp|udp) (\S+): bind: address already in use`)
)

// busyRetry is how long start keeps trying a learnt address another
// process holds before it gives the node a new one.
const busyRetry = 5 * time.Second

// BuildNode builds cmd/hookline into dir with `go build`; it must run inside
// the hookline module (the repository), or use --hookline PATH.
func BuildNode(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "hookline")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/hookline/hookline/cmd/hookline")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/hookline: %v\n%s\nrun hookbench inside the hookline repository, or pass --hookline PATH to a built binary", err, out)
	}
	return bin, nil
}

// StartNode starts a node and waits until it serves.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if cfg.Binary == "" || cfg.DataDir == "" || cfg.AdminToken == "" {
		return nil, errors.New("start node: Binary, DataDir and AdminToken are required")
	}
	setDefault(&cfg.StartTimeout, 60*time.Second)
	n := &Node{cfg: cfg}
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// StartDialed starts a node and dials its control API with its admin
// token; on error it leaves nothing running.
func StartDialed(ctx context.Context, cfg NodeConfig) (*Node, *API, error) {
	n, err := StartNode(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	api, err := Dial(n.GRPCAddr(), cfg.AdminToken)
	if err != nil {
		n.Stop(30 * time.Second)
		return nil, nil, err
	}
	return n, api, nil
}

// start starts a process and waits until it serves. A process that could
// not listen on a learnt address, because another process took it while
// the node was down, is started again on that address until busyRetry has
// passed, then on one the system chooses (the node keeps its data; a
// cluster member's new address only changes its place in the ranking).
func (n *Node) start(ctx context.Context) error {
	deadline := time.Now().Add(busyRetry)
	for {
		err := n.startOnce(ctx)
		if err == nil {
			n.mu.Lock()
			n.starts++
			n.mu.Unlock()
			return nil
		}
		m := busyLine.FindStringSubmatch(err.Error())
		if m == nil || !n.learnt(m[1]) {
			return err
		}
		if time.Now().After(deadline) {
			n.forget(m[1])
			fmt.Fprintf(cmp.Or(n.cfg.Log, io.Discard), "hookbench: another process holds %s: the node starts on a new address\n", m[1])
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// learnt reports whether addr is one of the addresses the node keeps.
func (n *Node) learnt(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := n.bound
	return addr == b.grpc || addr == b.http || addr == b.cluster || addr == b.gossip
}

// forget lets the system choose the node's next address in place of addr.
func (n *Node) forget(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range []*string{&n.bound.grpc, &n.bound.http, &n.bound.cluster, &n.bound.gossip} {
		if *f == addr {
			*f = ""
		}
	}
}

func (n *Node) startOnce(ctx context.Context) error {
	n.mu.Lock()
	addrs := n.bound.flags()
	n.mu.Unlock()
	cmd := exec.Command(n.cfg.Binary, append([]string{"serve", "--data", n.cfg.DataDir, "--allow-private-targets"}, addrs...)...)
	cmd.Args = append(cmd.Args, n.cfg.Args...)
	cmd.Env = append(append(os.Environ(), "HOOKLINE_ADMIN_TOKEN="+n.cfg.AdminToken), n.cfg.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %s: %w", n.cfg.Binary, err)
	}
	done := make(chan struct{})
	ready := make(chan string, 1)
	n.mu.Lock()
	n.cmd, n.done, n.grpcAddr, n.gossip = cmd, done, "", ""
	n.tail = nil // this process's lines only: start reads its failure there
	n.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			n.mu.Lock()
			n.tail = append(n.tail, line)
			if len(n.tail) > 50 {
				n.tail = n.tail[len(n.tail)-50:]
			}
			n.mu.Unlock()
			if n.cfg.Log != nil {
				fmt.Fprintln(n.cfg.Log, line)
			}
			if m := startedLine.FindStringSubmatch(line); m != nil {
				n.mu.Lock()
				n.gossip = m[2]
				n.bound.cluster, n.bound.gossip = m[1], m[2]
				n.mu.Unlock()
			}
			if m := servingLine.FindStringSubmatch(line); m != nil {
				n.mu.Lock()
				n.httpAddr = m[2]
				n.bound.grpc, n.bound.http = m[1], m[2]
				n.mu.Unlock()
				select {
				case ready <- m[1]:
				default:
				}
			}
		}
		cmd.Wait()
		n.mu.Lock()
		if st := cmd.ProcessState; st != nil {
			n.past.CPU += st.UserTime() + st.SystemTime()
			if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
				n.past.PeakRSS = max(n.past.PeakRSS, ru.Maxrss<<10)
			}
		}
		n.mu.Unlock()
		close(done)
	}()
	t := time.NewTimer(n.cfg.StartTimeout)
	defer t.Stop()
	select {
	case addr := <-ready:
		n.mu.Lock()
		n.grpcAddr = addr
		n.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("hookline serve exited before serving:\n%s", n.Tail())
	case <-t.C:
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("hookline serve did not say it serves within %v:\n%s", n.cfg.StartTimeout, n.Tail())
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("start node: %w; its log:\n%s", ctx.Err(), n.Tail())
	}
}

// GRPCAddr is the gRPC address of the current process.
func (n *Node) GRPCAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.grpcAddr
}

// HTTPAddr is the REST (and /metrics) address of the current process.
func (n *Node) HTTPAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.httpAddr
}

// Metric reads one metric of the node's /metrics (the sum over its
// labels); ok is false when the node does not export it.
func (n *Node) Metric(ctx context.Context, name string) (v float64, ok bool, err error) {
	vs, err := n.Metrics(ctx, name)
	v, ok = vs[name]
	return v, ok, err
}

// Metrics reads several series of the node's /metrics in one scrape: for
// each name, the sum of its lines; a name the node does not export is
// missing from the map. A scrape costs the node some CPU (gauges that
// read its stores): a poll of several series scrapes once.
func (n *Node) Metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	addr := n.HTTPAddr()
	if addr == "" {
		return nil, errors.New("node has no HTTP address yet")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range names {
			if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
				continue
			}
			f := strings.Fields(line)
			x, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return nil, fmt.Errorf("metrics of %s: %q: %w", addr, line, err)
			}
			out[name] += x
		}
	}
	return out, sc.Err()
}

// DataDir is the node's data directory.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// GossipAddr is the memberlist address of the current process, from its
// "cluster node started" log line; empty before that line.
func (n *Node) GossipAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gossip
}

// PID is the process id of the current process.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// Starts counts the processes that started serving: a start retried
// because another process held one of the node's addresses counts once.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// Tail is the node's last log lines.
func (n *Node) Tail() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.tail, "\n")
}

// Usage sums the CPU of every process so far and gives the highest peak
// RSS of any of them.
func (n *Node) Usage() (Usage, error) {
	n.mu.Lock()
	u, cmd, done := n.past, n.cmd, n.done
	n.mu.Unlock()
	select {
	case <-done:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.past, nil
	default:
	}
	cur, err := procUsage(cmd.Process.Pid)
	if err != nil {
		return u, err
	}
	u.CPU += cur.CPU
	u.PeakRSS = max(u.PeakRSS, cur.PeakRSS)
	return u, nil
}

// Kill ends the current process with SIGKILL and waits for it.
func (n *Node) Kill() error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill node: %w", err)
	}
	<-done
	return nil
}

// Restart starts a new process on the same data directory (after Kill or
// Stop).
func (n *Node) Restart(ctx context.Context) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	select {
	case <-done:
	default:
		return errors.New("restart node: the node still runs; Kill or Stop it first")
	}
	return n.start(ctx)
}

// Stop ends the current process with SIGTERM, and SIGKILL after timeout.
func (n *Node) Stop(timeout time.Duration) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	select {
	case <-done:
		return nil
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("node did not stop within %v of SIGTERM; killed it", timeout)
	}
}

// RestartWith stops the current process (SIGTERM, SIGKILL after timeout)
// unless it has ended already, and starts a new one on the same data
// directory with args in place of the configured extra arguments (the
// acceptance run switches --faults on and off this way).
func (n *Node) RestartWith(ctx context.Context, timeout time.Duration, args []string) error {
	if err := n.Stop(timeout); err != nil {
		return err
	}
	n.mu.Lock()
	n.cfg.Args = args
	n.mu.Unlock()
	return n.start(ctx)
}

// Exited is closed when the current process has ended (and been waited
// for).
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.done
}

// Args returns the extra arguments the node starts with.
func (n *Node) Args() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.cfg.Args...)
}
