// Command hookline is the Hookline binary: `hookline serve` runs a node,
// `hookline dev` a local playground, `hookline relay` moves a producer's
// outbox rows into Hookline, `hookline receive` is a local receiver that
// verifies and prints webhooks, and the other commands are clients of a
// node's control API (through the client package). Wiring only: the logic
// lives in the packages.
//
// Every command is one row of the table commands, from which the usage
// text is made: a command added there is listed. The flags of serve are one
// table too (serveFlags): a row names the flag, its environment variable,
// its default and the field of node.Config it sets.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one command of the binary. Exactly one of run and call is
// set.
type command struct {
	// name is one or two words: "serve", "endpoints create".
	name string
	// group heads the command's part of the usage text.
	group   string
	summary string
	// run runs a command that parses its own flags.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// call declares a client command's own flags and returns what it does
	// with a connected client; the client flags (clientFlags) are added.
	call func(fs *flag.FlagSet) func(ctx context.Context, c *conn) error
}

const (
	groupNode     = "Run Hookline"
	groupProducer = "Producers: the transactional outbox (see the README)"
	groupReceiver = "Receivers"
	groupClient   = "Clients of a node's control API"
)

// commands is every command, in the order of the usage text.
var commands = []command{
	{name: "dev", group: groupNode, summary: "a local playground: node, receiver, sample events", run: dev},
	{name: "serve", group: groupNode, summary: "run a node", run: func(ctx context.Context, args []string, _, stderr io.Writer) error { return serve(ctx, args, stderr) }},
	{name: "reconcile", group: groupNode, summary: "compare every durable boundary with the log (admin; --repair; --data DIR: a stopped node)", run: reconcileRun},

	{name: "relay", group: groupProducer, summary: "move committed outbox rows into Hookline, until stopped", run: relayRun},
	{name: "outbox schema", group: groupProducer, summary: "print the outbox table's SQL, for your migrations", run: outboxSchema},
	{name: "outbox init", group: groupProducer, summary: "create the outbox table (if it does not exist)", run: outboxInit},
	{name: "outbox reconcile", group: groupProducer, summary: "compare committed outbox rows with the events Hookline accepted", run: outboxReconcile},

	{name: "receive", group: groupReceiver, summary: "a local receiver for trying Hookline out: verifies and prints each webhook (--secret)", run: receiveRun},

	{name: "tenants create", group: groupClient, summary: "create a tenant (admin)", call: tenantsCreate},
	{name: "tenants get", group: groupClient, summary: "show a tenant and its keys", call: tenantsGet},
	{name: "tenants update", group: groupClient, summary: "change a tenant's own settings (--schema-enforcement off|warn|reject, --retention DURATION)", call: tenantsUpdate},
	{name: "tenants erase", group: groupClient, summary: "crypto-shred a tenant's payloads and response bodies, for good (admin; --confirm repeats --id)", call: tenantsErase},
	{name: "event-types put", group: groupClient, summary: "define an event type of the catalog, or a new version: description, example, JSON Schema", call: eventTypesPut},
	{name: "event-types list", group: groupClient, summary: "list the catalog's event types and the schema enforcement", call: eventTypesList},
	{name: "event-types export", group: groupClient, summary: "print the catalog as an OpenAPI 3.1 document of webhooks, or as JSON Schemas (--format jsonschema)", call: eventTypesExport},
	{name: "keys issue", group: groupClient, summary: "issue an API key for a tenant (admin); shown once", call: keysIssue},
	{name: "keys revoke", group: groupClient, summary: "revoke an API key (admin)", call: keysRevoke},
	{name: "keys reseal", group: groupClient, summary: "rotate the master key: reseal every endpoint's secrets under the current one (admin)", call: keysReseal},
	{name: "endpoints create", group: groupClient, summary: "register an endpoint; its secret is shown once", call: endpointsCreate},
	{name: "endpoints get", group: groupClient, summary: "show an endpoint", call: endpointsGet},
	{name: "endpoints list", group: groupClient, summary: "list endpoints", call: endpointsList},
	{name: "endpoints update", group: groupClient, summary: "change an endpoint's settings", call: endpointsUpdate},
	{name: "endpoints pause", group: groupClient, summary: "hold an endpoint's deliveries", call: endpointsPause},
	{name: "endpoints resume", group: groupClient, summary: "resume a paused endpoint", call: endpointsResume},
	{name: "endpoints delete", group: groupClient, summary: "delete an endpoint", call: endpointsDelete},
	{name: "endpoints rotate-secret", group: groupClient, summary: "add a new signing secret; shown once", call: endpointsRotate},
	{name: "endpoints retire-secret", group: groupClient, summary: "retire an old secret before its overlap ends", call: endpointsRetire},
	{name: "endpoints recover", group: groupClient, summary: "replay an endpoint's deliveries in a time window (filter by status, types; --dry-run for the manifest)", call: endpointsRecover},
	{name: "endpoints pull", group: groupClient, summary: "lease a pull endpoint's due deliveries and print them (--ack acknowledges them)", call: endpointsPull},
	{name: "endpoints ordering-keys", group: groupClient, summary: "list an ordered endpoint's blocked keys (--state all: every key with a delivery waiting)", call: endpointsOrderingKeys},
	{name: "endpoints skip-key", group: groupClient, summary: "end an ordering key's head delivery so that its next one goes (--key, --head)", call: endpointsSkipKey},
	{name: "endpoints recovery", group: groupClient, summary: "show the progress of a recovery (--recovery), or list an endpoint's recoveries", call: endpointsRecovery},
	{name: "events publish", group: groupClient, summary: "publish an event", call: eventsPublish},
	{name: "events get", group: groupClient, summary: "show an event and its payload", call: eventsGet},
	{name: "events operational-types", group: groupClient, summary: "list Hookline's own event types (hookline.*) an endpoint can name, with an example each", call: eventsOperationalTypes},
	{name: "events routing", group: groupClient, summary: "why an event reached, or did not reach, each endpoint (from the log)", call: eventsRouting},
	{name: "deliveries list", group: groupClient, summary: "search deliveries (newest first)", call: deliveriesList},
	{name: "deliveries get", group: groupClient, summary: "show a delivery and its attempts", call: deliveriesGet},
	{name: "deliveries replay", group: groupClient, summary: "attempt a delivery again (same webhook-id)", call: deliveriesReplay},
}

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
		fmt.Fprint(stderr, usage())
		return flag.ErrHelp
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	}
	// Flags may come before the command (hookline --addr X endpoints
	// list): they are moved after it.
	lead, rest := leadingFlags(args)
	cmd, err := lookup(rest)
	if err != nil {
		return err
	}
	words := len(strings.Fields(cmd.name))
	args = append(lead, rest[words:]...)
	if cmd.run != nil {
		return cmd.run(ctx, args, stdout, stderr)
	}
	return runClient(ctx, cmd, args, stdout, stderr)
}

// leadingFlags splits the flags before the command's words from the rest.
// A flag takes the next argument as its value unless it has "=" or is a
// boolean flag of the client commands.
func leadingFlags(args []string) (lead, rest []string) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		lead = append(lead, args[0])
		name := strings.TrimLeft(args[0], "-")
		takesValue := !strings.Contains(name, "=") && !boolFlags[name]
		args = args[1:]
		if takesValue && len(args) > 0 {
			lead = append(lead, args[0])
			args = args[1:]
		}
	}
	return lead, args
}

// boolFlags are the client flags that take no value (--quiet and -q are
// those of the commands that show a secret once).
var boolFlags = map[string]bool{"json": true, "plaintext": true, "quiet": true, "q": true}

// lookup finds the command that args start with: two words, or one.
func lookup(args []string) (command, error) {
	if len(args) == 0 {
		return command{}, usageError("give a command, e.g. hookline endpoints list")
	}
	for _, c := range commands {
		if len(args) >= 2 && c.name == args[0]+" "+args[1] {
			return c, nil
		}
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c, nil
		}
	}
	for _, c := range commands {
		if strings.HasPrefix(c.name, args[0]+" ") {
			return command{}, usageError(fmt.Sprintf("%s: give an action, e.g. hookline %s", args[0], c.name))
		}
	}
	return command{}, usageError(fmt.Sprintf("unknown command %q", strings.Join(args[:min(2, len(args))], " ")))
}

// usageError is msg followed by the list of commands.
func usageError(msg string) error {
	return fmt.Errorf("%s\n\n%s", msg, commandList())
}

// usage is the binary's help text, made from the command table and the
// client flags.
func usage() string {
	var b strings.Builder
	b.WriteString("hookline: webhook delivery, at least once, signed, retried, searchable.\n\n")
	b.WriteString("Usage: hookline COMMAND [flags]    (hookline COMMAND -h lists a command's flags)\n\n")
	b.WriteString(commandList())
	b.WriteString("\nClient flags (before or after the command; the client commands, relay and outbox reconcile):\n")
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	clientFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%-18s %s\n", strings.TrimSpace(f.Name+" "+name), help)
	})
	return b.String()
}

// commandList lists the commands by group, with their summaries.
func commandList() string {
	var b strings.Builder
	group := ""
	for _, c := range commands {
		if c.group != group {
			if group != "" {
				b.WriteString("\n")
			}
			group = c.group
			b.WriteString(group + ":\n")
		}
		fmt.Fprintf(&b, "  hookline %-24s %s\n", c.name, c.summary)
	}
	return b.String()
}
