package command

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
)

// Identify handles the messages that tell a grain which one it is:
// actor.Started, for an actor whose props gave its identity (*id set
// already), and cluster.ClusterInit, which names a cluster grain (*id set
// from it). It reports whether the grain now knows its identity and must
// activate; any other message gives false.
func Identify(msg any, id *string) bool {
	switch m := msg.(type) {
	case *actor.Started:
		return *id != ""
	case *cluster.ClusterInit:
		if *id == "" && m.Identity != nil {
			*id = m.Identity.Identity
			return true
		}
	}
	return false
}

// Name returns the name of the field set in cmd's oneof "command" (create,
// rotate, lease, ...), the command's kind in its event ids and logs;
// "unknown" when none is set.
func Name(cmd proto.Message) string {
	m := cmd.ProtoReflect()
	if od := m.Descriptor().Oneofs().ByName("command"); od != nil {
		if fd := m.WhichOneof(od); fd != nil {
			return string(fd.Name())
		}
	}
	return "unknown"
}
