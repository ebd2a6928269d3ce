package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hookline/hookline/internal/brokers"
)

// privatePostgres is a PostgreSQL server of the acceptance run's own, in a
// temporary directory on a port of its own, so that the pg-restart fault
// restarts it without disturbing anyone else's server. It listens on
// loopback only and trusts its one user there (a throwaway test server).
type privatePostgres struct {
	bin, dir, data string
	port           int
	asPostgres     bool // running as root: the server runs as the postgres user
}

// startPrivatePostgres runs initdb and starts the server.
func startPrivatePostgres(ctx context.Context) (*privatePostgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hookbench-pg-")
	if err != nil {
		return nil, err
	}
	p := &privatePostgres{bin: bin, dir: dir, data: filepath.Join(dir, "data"), asPostgres: os.Geteuid() == 0}
	if p.port, err = brokers.FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if p.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, the server must run as the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if out, err := p.run(ctx, "initdb", "-D", p.data, "-U", "hookline", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := p.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
}

// postgresBin finds the directory of initdb and pg_ctl: Debian's
// /usr/lib/postgresql/N/bin (the newest), else the PATH's.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		na, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		nb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return na - nb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i], nil
		}
	}
	if path, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(path), nil
	}
	return "", errors.New("no PostgreSQL server binaries (pg_ctl, initdb): install Debian's postgresql, or run .ci/postgres.sh once")
}

// run runs one of the server's programs, as postgres when we are root.
func (p *privatePostgres) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	path := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if p.asPostgres {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = p.dir
	return cmd.CombinedOutput()
}

func (p *privatePostgres) opts() string {
	return fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s -c max_connections=200", p.port, p.dir)
}

func (p *privatePostgres) start(ctx context.Context) error {
	out, err := p.run(ctx, "pg_ctl", "-D", p.data, "-l", filepath.Join(p.dir, "server.log"), "-o", p.opts(), "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	return nil
}

// DSN is the server's URL.
func (p *privatePostgres) DSN() string {
	return fmt.Sprintf("postgres://hookline@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// restart stops the server in immediate mode (every process ends at once,
// as in a crash: connections are cut, and the server recovers from its WAL
// when it starts) and starts it again; it returns how long it was down.
func (p *privatePostgres) restart(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	if out, err := p.run(ctx, "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		return 0, fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	if err := p.start(ctx); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// close stops the server and removes its directory.
func (p *privatePostgres) close() {
	_, _ = p.run(context.Background(), "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "stop")
	os.RemoveAll(p.dir)
}
