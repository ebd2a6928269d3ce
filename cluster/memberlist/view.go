package memberlist

import (
	"slices"
	"strings"
	"sync"

	hml "github.com/hashicorp/memberlist"
)

// view is the provider's own copy of memberlist's live nodes, kept by the
// event delegate. memberlist's Members() returns pointers to its internal
// node records, which it rewrites in place (a node's Meta when that node
// gossips new metadata, its address when it moves) under a lock it does
// not share: reading them after Members() returns is a data race. The
// delegate is called under that lock, so the copies it takes are whole.
type view struct {
	next hml.EventDelegate // the channel delegate the drain goroutine reads

	mu    sync.Mutex
	nodes map[string]hml.Node // by name; the live nodes, this one included
}

func newView(next hml.EventDelegate) *view {
	return &view{next: next, nodes: map[string]hml.Node{}}
}

var _ hml.EventDelegate = (*view)(nil)

// NotifyJoin records a node that became alive.
func (v *view) NotifyJoin(n *hml.Node) {
	v.put(n)
	v.next.NotifyJoin(n)
}

// NotifyUpdate records a live node's new metadata or address.
func (v *view) NotifyUpdate(n *hml.Node) {
	v.put(n)
	v.next.NotifyUpdate(n)
}

// NotifyLeave forgets a node that left or was declared dead.
func (v *view) NotifyLeave(n *hml.Node) {
	v.mu.Lock()
	delete(v.nodes, n.Name)
	v.mu.Unlock()
	v.next.NotifyLeave(n)
}

func (v *view) put(n *hml.Node) {
	c := *n
	c.Meta = slices.Clone(n.Meta)
	c.Addr = slices.Clone(n.Addr)
	v.mu.Lock()
	v.nodes[n.Name] = c
	v.mu.Unlock()
}

// live returns copies of the live nodes, sorted by name.
func (v *view) live() []hml.Node {
	v.mu.Lock()
	out := make([]hml.Node, 0, len(v.nodes))
	for _, n := range v.nodes {
		out = append(out, n)
	}
	v.mu.Unlock()
	slices.SortFunc(out, func(a, b hml.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}
