package main

import (
	"context"
	"fmt"
	"slices"
)

// startCluster starts --nodes nodes on PostgreSQL: a server of the run's own
// (--pg private), which the pg-restart fault restarts, or the one given.
func (a *acceptance) startCluster(ctx context.Context) (func(), error) {
	b := a.b
	dsn := b.cfg.PG
	if dsn == "private" {
		pg, err := startPrivatePostgres(ctx)
		if err != nil {
			return nil, err
		}
		a.pg, dsn = pg, pg.DSN()
		fmt.Fprintf(b.stderr, "hookbench: acceptance: PostgreSQL of its own on %s\n", pg.DSN())
	}
	c, err := StartCluster(ctx, ClusterConfig{Nodes: b.cfg.Nodes, DSN: dsn, Binary: a.bin, Log: a.nodeLog(), KeepData: b.cfg.KeepData,
		Args: a.nodeArgs("")})
	if err != nil {
		if a.pg != nil {
			a.pg.close()
		}
		return nil, err
	}
	a.nodes, a.apis = c.Nodes, c.APIs
	for _, n := range c.Nodes {
		args := n.Args()
		a.base = append(a.base, args[:len(args)-len(a.nodeArgs(""))])
	}
	b.node, b.api, b.apis, b.cfg.Token = c.Nodes[0], c.APIs[0], c.APIs, c.Token
	fmt.Fprintf(b.stderr, "hookbench: acceptance: %d nodes, schema %s\n", len(c.Nodes), c.Schema)
	return func() {
		if err := c.Close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(b.stderr, "hookbench: %v\n", err)
		}
		if a.pg != nil {
			a.pg.close()
		}
	}, nil
}

// baseArgs are node i's own serve arguments (store, schema, join), before
// the acceptance run's.
func (a *acceptance) baseArgs(i int) []string {
	if i < len(a.base) {
		return slices.Clone(a.base[i])
	}
	return nil
}
