package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hookline/hookline/cluster"
)

// greeter is a grain that greets in its own name.
type greeter struct{ name string }

func (g *greeter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pcluster.ClusterInit:
		g.name = msg.Identity.Identity
	case *wrapperspb.StringValue:
		ctx.Respond(wrapperspb.String("hello " + msg.GetValue() + ", I am " + g.name))
	}
}

// A single node is a cluster of one: it hosts every grain.
func ExampleStart() {
	ctx := context.Background()
	node, err := cluster.Start(ctx, cluster.Config{
		Port:       cluster.AnyPort,
		GossipPort: cluster.AnyPort,
		Kinds: []*pcluster.Kind{
			pcluster.NewKind("greeter", actor.PropsFromProducer(func() actor.Actor { return &greeter{} })),
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := node.Request(ctx, "greeter", "ada", wrapperspb.String("bob"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.(*wrapperspb.StringValue).GetValue())
	fmt.Println("members:", len(node.Members()))

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := node.Stop(stopCtx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// hello bob, I am ada
	// members: 1
}
