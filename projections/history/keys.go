package history

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// Keys, under the history's prefix (S = projections.AppendString, D =
// projections.AppendTimeDesc of the planned time, so scans read newest
// first; day = ^(days since the Unix epoch, UTC) as 4 bytes BE, so newer days
// come first and a whole day is one range):
//
//	i S(delivery)                              D: where the delivery lives
//	d day r D S(delivery)                      hooklinev1.DeliveryRecord (protobuf; JSON before)
//	d day a S(delivery) revision               attempts (no longer written; pruned with their day)
//	d day t S(tenant) D S(delivery)            index: tenant
//	d day e S(tenant) S(endpoint) D S(d)       index: tenant, endpoint
//	d day s S(tenant) status D S(d)            index: tenant, status
//	d day E S(tenant) S(endpoint) status D S(d) index: tenant, endpoint, status
//	d day y S(tenant) S(event type) D S(d)     index: tenant, event type
//
// The delivery's record key is rebuilt from the index key's day, D and
// delivery id. An index value is the delivery's partition (2 bytes, big
// endian; empty in stores written before it was kept there): a search for
// some partitions passes over the others' entries without loading their
// records, which in a cluster are about half of what a member holds (the
// partitions it stands by for).

const dayBytes = 4

// dayOf returns the UTC day number of t.
func dayOf(t time.Time) int64 {
	s := t.Unix()
	d := s / 86400
	if s < 0 && s%86400 != 0 {
		d--
	}
	return d
}

// dayPrefix returns "d" + day.
func dayPrefix(day int64) []byte {
	return binary.BigEndian.AppendUint32([]byte{'d'}, ^uint32(day))
}

// dayOfKey returns the day of a "d" key.
func dayOfKey(k []byte) (int64, error) {
	if len(k) < 1+dayBytes || k[0] != 'd' {
		return 0, fmt.Errorf("%w: not a day key", projections.ErrBadKey)
	}
	return int64(int32(^binary.BigEndian.Uint32(k[1:]))), nil
}

func idKey(deliveryID string) []byte { return projections.AppendString([]byte{'i'}, deliveryID) }

func recordKey(planned time.Time, deliveryID string) []byte {
	k := append(dayPrefix(dayOf(planned)), 'r')
	return projections.AppendString(projections.AppendTimeDesc(k, planned), deliveryID)
}

func attemptPrefix(planned time.Time, deliveryID string) []byte {
	return projections.AppendString(append(dayPrefix(dayOf(planned)), 'a'), deliveryID)
}

func attemptKey(planned time.Time, deliveryID string, rev uint64) []byte {
	return projections.AppendUint64(attemptPrefix(planned, deliveryID), rev)
}

// index names one of the search indexes.
type index byte

const (
	byTenant         index = 't'
	byEndpoint       index = 'e'
	byStatus         index = 's'
	byEndpointStatus index = 'E'
	byType           index = 'y'
)

// indexPrefix returns the part of an index key after the day and before D,
// for the given filter values.
func indexPrefix(ix index, tenant, endpoint string, status Status, eventType string) []byte {
	k := projections.AppendString([]byte{byte(ix)}, tenant)
	switch ix {
	case byEndpoint:
		k = projections.AppendString(k, endpoint)
	case byStatus:
		k = append(k, byte(status))
	case byEndpointStatus:
		k = append(projections.AppendString(k, endpoint), byte(status))
	case byType:
		k = projections.AppendString(k, eventType)
	}
	return k
}

// indexKeys returns every index key of d.
func indexKeys(d *Delivery) [][]byte {
	day := dayPrefix(dayOf(d.PlannedAt))
	var keys [][]byte
	for _, ix := range []index{byTenant, byEndpoint, byStatus, byEndpointStatus, byType} {
		k := append(append([]byte(nil), day...), indexPrefix(ix, d.TenantID, d.EndpointID, d.Status, d.EventType)...)
		keys = append(keys, projections.AppendString(projections.AppendTimeDesc(k, d.PlannedAt), d.ID))
	}
	return keys
}

// indexValue is the value of every index key of d: its partition.
func indexValue(d *Delivery) []byte {
	return binary.BigEndian.AppendUint16(nil, uint16(events.PartitionOf(d.EndpointID)))
}

// partitionOfValue returns the partition an index value holds; false for
// an entry written without it.
func partitionOfValue(v []byte) (events.Partition, bool) {
	if len(v) != 2 {
		return 0, false
	}
	return events.Partition(binary.BigEndian.Uint16(v)), true
}

// statusKeys returns the index keys of d that depend on its status.
func statusKeys(d *Delivery) [][]byte {
	keys := indexKeys(d)
	return [][]byte{keys[2], keys[3]}
}

// parseIndexTail decodes what follows an index prefix: D and the delivery id.
func parseIndexTail(tail []byte) (planned time.Time, deliveryID string, err error) {
	planned, rest, err := projections.ReadTimeDesc(tail)
	if err != nil {
		return time.Time{}, "", err
	}
	deliveryID, _, err = projections.ReadString(rest)
	return planned, deliveryID, err
}
