package memberlist

import (
	"encoding/json"
	"fmt"
	"slices"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	hml "github.com/hashicorp/memberlist"
)

// meta is what each memberlist node carries in its Meta: the protoactor
// member behind the gossip address. JSON with one-letter keys keeps it well
// under memberlist's 512-byte limit for the handful of kinds a node hosts,
// and readable in memberlist's debug output.
type meta struct {
	Cluster string   `json:"c"`
	ID      string   `json:"i"`
	Host    string   `json:"h"`
	Port    int      `json:"p"`
	Kinds   []string `json:"k,omitempty"`
	// Client marks a node that routes requests but hosts no grains; it is
	// left out of the member set given to protoactor.
	Client bool `json:"cl,omitempty"`
	// Starting marks a member that is not ready yet (Config.Starting,
	// until Provider.Ready): protoactor sees it with StartingKind among
	// its kinds.
	Starting bool `json:"st,omitempty"`
}

// StartingKind is a kind no grain has: a member carries it among its kinds
// while it starts (Config.Starting), so that placement can leave grains it
// need not host to the members that are ready. Members of a version
// without it never carry it, and count as ready.
const StartingKind = "hookline.starting"

func (m meta) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode node meta: %w", err)
	}
	if len(b) > hml.MetaMaxSize {
		return nil, fmt.Errorf("encode node meta: %d bytes, memberlist allows %d: use fewer or shorter kind names", len(b), hml.MetaMaxSize)
	}
	return b, nil
}

func decodeMeta(b []byte) (meta, error) {
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, fmt.Errorf("decode node meta: %w", err)
	}
	if m.ID == "" || m.Host == "" || m.Port <= 0 {
		return meta{}, fmt.Errorf("decode node meta: missing member id, host or port")
	}
	return m, nil
}

func (m meta) member() *pcluster.Member {
	kinds := slices.Clone(m.Kinds)
	if m.Starting {
		kinds = append(kinds, StartingKind)
	}
	return &pcluster.Member{
		Id:    m.ID,
		Host:  m.Host,
		Port:  int32(m.Port),
		Kinds: kinds,
	}
}
