// Package brokers starts real message brokers on loopback for tests and
// benchmarks: nats-server with JetStream and RabbitMQ, from Debian's
// packages (nats-server, rabbitmq-server), each with its store in a
// directory of its own, killable and restartable on the same port and
// store. It starts no broker that is not installed: [ErrNotInstalled].
package brokers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrNotInstalled is returned when a broker's program is not installed.
var ErrNotInstalled = errors.New("not installed")

// Kind names a broker.
type Kind string

// The brokers this package starts.
const (
	NATS     Kind = "nats"
	RabbitMQ Kind = "rabbitmq"
)

// Server is one broker process on loopback.
type Server struct {
	kind Kind
	bin  string
	dir  string
	port int
	args []string
	env  []string
	// User and Password are the credentials RabbitMQ's default user has;
	// Token is the one NATS asks for (Options.NATSToken), if any.
	User, Password, Token string

	tls *TLSFiles // the server's TLS, if any

	cmd *exec.Cmd
}

// StartTimeout bounds how long a start waits for the broker to accept
// connections (an Erlang VM takes several seconds).
const StartTimeout = 60 * time.Second

// programs are where Debian installs each broker.
var programs = map[Kind][]string{
	NATS:     {"nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server"},
	RabbitMQ: {"/usr/lib/rabbitmq/bin/rabbitmq-server"},
}

// Find returns the path of kind's program, or ErrNotInstalled with the
// package to install.
func Find(kind Kind) (string, error) {
	for _, p := range programs[kind] {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	pkg := map[Kind]string{NATS: "nats-server", RabbitMQ: "rabbitmq-server"}[kind]
	return "", fmt.Errorf("%s: %w (apt-get install %s)", kind, ErrNotInstalled, pkg)
}

// Options are settings of a broker that Start leaves at their defaults.
type Options struct {
	// NATSToken makes nats-server require this token of its clients.
	NATSToken string
	// NATSTLS, when set, makes nats-server require TLS and a client
	// certificate its CA signed: PEM files of its certificate, its key
	// and the CA.
	NATSTLS *TLSFiles
}

// TLSFiles are the PEM files of a server's TLS.
type TLSFiles struct {
	Cert, Key, CA string
}

// Start starts kind with its store under dir (which must exist), on a
// free loopback port, and waits until it accepts connections.
func Start(ctx context.Context, kind Kind, dir string) (*Server, error) {
	return StartWith(ctx, kind, dir, Options{})
}

// StartWith is Start with opts.
func StartWith(ctx context.Context, kind Kind, dir string, opts Options) (*Server, error) {
	bin, err := Find(kind)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{kind: kind, bin: bin, dir: dir, port: port}
	switch kind {
	case NATS:
		s.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js")}
		if opts.NATSToken != "" {
			s.Token = opts.NATSToken
			s.args = append(s.args, "--auth", opts.NATSToken)
		}
		if f := opts.NATSTLS; f != nil {
			s.tls = f
			s.args = append(s.args, "--tlsverify", "--tlscert", f.Cert, "--tlskey", f.Key, "--tlscacert", f.CA)
		}
	case RabbitMQ:
		if err := s.configureRabbitMQ(); err != nil {
			return nil, err
		}
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// configureRabbitMQ writes the node's configuration under dir: its
// listener, its default user, no plugins, and its node name, data and
// logs in dir, so that several nodes run side by side.
func (s *Server) configureRabbitMQ() error {
	dist, err := FreePort()
	if err != nil {
		return err
	}
	s.User, s.Password = "hookline", "hookline-"+strconv.Itoa(s.port)
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\ndefault_user = %s\ndefault_pass = %s\nloopback_users = none\n",
		s.port, s.User, s.Password)
	if err := os.WriteFile(filepath.Join(s.dir, "rabbitmq.conf"), []byte(conf), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "enabled_plugins"), []byte("[].\n"), 0o600); err != nil {
		return err
	}
	s.env = append(os.Environ(),
		"RABBITMQ_NODENAME=hl"+strconv.Itoa(s.port)+"@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(s.port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(s.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(s.dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(s.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(s.dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(s.dir, "pid"),
		"HOME="+s.dir,             // the Erlang cookie
		"RUNNING_UNDER_SYSTEMD=1", // exec the VM: the process is the broker
	)
	return nil
}

// URL is the broker's base URL: nats://127.0.0.1:port, or
// amqp://user:password@127.0.0.1:port.
func (s *Server) URL() string {
	if s.kind == RabbitMQ {
		return "amqp://" + s.User + ":" + s.Password + "@127.0.0.1:" + strconv.Itoa(s.port)
	}
	return "nats://127.0.0.1:" + strconv.Itoa(s.port)
}

// PID is the broker's process id, 0 when it is not running.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Addr is the broker's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the broker again on the same port and store, and waits
// until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	if s.cmd != nil {
		return errors.New("the broker is running")
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.kind == RabbitMQ {
		out, err := os.OpenFile(filepath.Join(s.dir, "server.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.kind, err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.ready() {
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("%s exited while starting (see %s)", s.kind, s.dir)
		case <-ctx.Done():
			s.Kill()
			return fmt.Errorf("%s did not accept connections within %v (see %s)", s.kind, StartTimeout, s.dir)
		case <-tick.C:
		}
	}
}

// ready reports whether the broker accepts a client connection.
func (s *Server) ready() bool {
	switch s.kind {
	case RabbitMQ:
		c, err := amqp.DialConfig(s.URL(), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err != nil {
			return false
		}
		c.Close()
	default:
		opts := []nats.Option{nats.Timeout(500 * time.Millisecond), nats.Token(s.Token)}
		if s.tls != nil {
			// Any TCP answer will do: the broker's own TLS is for the tests.
			c, err := net.DialTimeout("tcp", s.Addr(), 500*time.Millisecond)
			if err != nil {
				return false
			}
			c.Close()
			return true
		}
		nc, err := nats.Connect(s.URL(), opts...)
		if err != nil {
			return false
		}
		nc.Close()
	}
	return true
}

// Kill kills the broker's process group with SIGKILL and waits until its
// port is free.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	s.cmd = nil
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// FreePort returns a loopback port nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
