// Command hookline is the Hookline binary: `hookline serve` runs a node,
// `hookline dev` a local playground, and the other commands are clients of
// a node's control API. Wiring only: the logic lives in the packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `hookline: webhook delivery, at least once, signed, retried, searchable.

Usage:
  hookline dev                           a local playground: node, receiver, sample events
  hookline serve [flags]                 run a node (hookline serve -h for flags)
  hookline tenants create|get            manage tenants (admin token)
  hookline keys issue|revoke             manage a tenant's API keys (admin token)
  hookline endpoints create|get|list|update|pause|resume|rotate-secret|retire-secret|delete
  hookline events publish                publish an event
  hookline reconcile [--repair]          compare every durable boundary with the log (admin; --data DIR: a stopped node)

Client flags (before or after the command; also from the environment):
  --addr HOST:PORT   the node's gRPC address (HOOKLINE_ADDR, default 127.0.0.1:7070)
  --token TOKEN      an API key or the admin token (HOOKLINE_TOKEN)
  --json             print the answer as JSON
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "hookline:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "dev":
		return dev(ctx, args[1:], stdout, stderr)
	case "reconcile":
		return reconcileRun(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return client(ctx, args, stdout, stderr)
}
