package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/client"
)

// clientOptions are the flags of every client of a node: where it is, who
// calls, and how to trust it.
type clientOptions struct {
	addr, token, ca string
	plaintext       bool
	timeout         time.Duration
}

// clientFlags declares the client flags on fs. The token's default,
// HOOKLINE_TOKEN, is read when the flags are used (config), so that -h
// never shows it.
func clientFlags(fs *flag.FlagSet) *clientOptions {
	o := &clientOptions{}
	fs.StringVar(&o.addr, "addr", envOr("HOOKLINE_ADDR", client.DefaultAddr), "the node's gRPC address (HOOKLINE_ADDR)")
	fs.StringVar(&o.token, "token", "", "an API key or the admin token (default HOOKLINE_TOKEN)")
	fs.StringVar(&o.ca, "ca", os.Getenv("HOOKLINE_CA"), "PEM file of the CA that signed the node's certificate (HOOKLINE_CA); TLS is the default except on loopback")
	fs.BoolVar(&o.plaintext, "plaintext", false, "no TLS, even to a host that is not loopback (a private network)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up on a call after this long")
	return o
}

// config is the client's Config from the flags.
func (o *clientOptions) config() client.Config {
	return client.Config{Addr: o.addr, Token: cmp.Or(o.token, os.Getenv("HOOKLINE_TOKEN")), CAFile: o.ca, Plaintext: o.plaintext}
}

// errNoToken refuses a client command without a token, before any call.
var errNoToken = errors.New("no token: set HOOKLINE_TOKEN or pass --token (a tenant's API key; the admin token for admin commands)")

// connect is a client of the node the flags name, with their token.
func (o *clientOptions) connect() (*client.Client, error) {
	cfg := o.config()
	if cfg.Token == "" {
		return nil, errNoToken
	}
	return client.New(cfg)
}

// conn is a connected client with the caller's output choices.
type conn struct {
	*client.Client
	json    bool
	out     io.Writer
	timeout time.Duration
}

// ctx bounds one command's calls by --timeout.
func (c *conn) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

// runClient parses a client command's flags, connects and runs it.
func runClient(ctx context.Context, cmd command, args []string, stdout, stderr io.Writer) error {
	fs := newFlags(cmd.name)
	opts := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	do := cmd.call(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if q := fs.Lookup("quiet"); q != nil && q.Value.String() == "true" && *asJSON {
		return errQuietJSON
	}
	c, err := opts.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	return noNode(do(ctx, &conn{Client: c, json: *asJSON, out: stdout, timeout: opts.timeout}), opts.addr)
}

// noNode says, for a call that found no node at addr, that no node runs
// there and how to start one, in place of gRPC's transport error; any
// other error is returned as it is.
func noNode(err error, addr string) error {
	if status.Code(err) != codes.Unavailable {
		return err
	}
	why := ""
	switch msg := err.Error(); {
	case strings.Contains(msg, "connection refused"):
		why = "connection refused"
	case strings.Contains(msg, "no such host"):
		why = "no such host"
	case strings.Contains(msg, "i/o timeout"), strings.Contains(msg, "Error while dialing"):
		why = "it does not answer"
	default:
		return err
	}
	return fmt.Errorf("no node at %s (%s): start one with `hookline serve` (or `hookline dev` to try Hookline out), or give the address of a running one with --addr or HOOKLINE_ADDR", addr, why)
}
