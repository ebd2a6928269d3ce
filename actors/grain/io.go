package grain

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

type ioResult struct {
	v   any
	err error
}

// IO runs fn in a goroutine under timeout and continues with cont on the
// actor (through ReenterAfter), so a grain never blocks in Receive. cont gets
// fn's result, or an error if the future failed. The goroutine ends when fn
// returns, at the latest at the timeout.
func IO(ctx actor.Context, timeout time.Duration, fn func(context.Context) (any, error), cont func(any, error)) {
	f := actor.NewFuture(ctx.ActorSystem(), timeout+time.Second)
	root, pid := ctx.ActorSystem().Root, f.PID()
	go func() {
		c, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		v, err := fn(c)
		root.Send(pid, &ioResult{v: v, err: err})
	}()
	ctx.ReenterAfter(f, func(res any, err error) {
		if r, ok := res.(*ioResult); ok && err == nil {
			res, err = r.v, r.err
		} else if err == nil {
			err = fmt.Errorf("unexpected i/o result %T", res)
		}
		cont(res, err)
	})
}
