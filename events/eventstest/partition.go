package eventstest

import (
	"errors"

	"github.com/hookline/hookline/events"
)

// testPartitions: an event's partition is stored with it and read back by
// ReadStream, ReadAll and Subscribe, whatever its metadata looks like, and
// the metadata reads back as appended.
func testPartitions(e *env) {
	from := e.head()
	var evs []events.Event
	for i, meta := range []string{`{"content_type":"application/protobuf","cause":"c"}`, ``, `{}`, `[1,2]`, `{"hookline_partition":3}`, `not json`} {
		ev := newEvent("Part")
		ev.Metadata = []byte(meta)
		if meta == "" {
			ev.Metadata = nil
		}
		ev.Partition = events.Partition(1 + i*50)
		evs = append(evs, ev)
	}
	none := newEvent("Part") // no partition
	evs = append(evs, none)
	e.mustAppend(e.stream("a"), events.NoStream{}, evs[:3]...)
	for _, ev := range evs[3:] {
		e.mustAppend(e.stream("a"), events.StreamExists{}, ev)
	}
	e.checkStream(e.stream("a"), evs)
	seen := e.collect(e.ctx, from, e.own(), until(none.ID))
	e.checkSeen(seen, evs)
	all, err := e.log.ReadAll(e.ctx, from, 1000)
	if err != nil {
		e.Fatalf("read all: %v", err)
	}
	var mine []events.Record
	for _, r := range all {
		if e.own().Match(&r) {
			mine = append(mine, r)
		}
	}
	if len(mine) >= len(evs) {
		e.checkSeen(mine[:len(evs)], evs)
	}

	bad := newEvent("Part")
	bad.Partition = events.Partitions + 1
	if _, err := e.log.Append(e.ctx, e.stream("b"), events.Any{}, bad); !errors.Is(err, events.ErrInvalid) {
		e.Errorf("append of partition %d: err = %v, want ErrInvalid", bad.Partition, err)
	}
}

// testFilterPartitions: a filter's partitions pass only their records;
// NoPartition in the set passes the records of none.
func testFilterPartitions(e *env) {
	from := e.head()
	var onlyTwo, twoAndNone []events.Event
	for i, p := range []events.Partition{2, 0, 5, 2, events.Partitions, 0, 2} {
		ev := newEvent("FP")
		ev.Partition = p
		e.mustAppend(e.stream("s"+string(rune('a'+i))), events.NoStream{}, ev)
		if p == 2 {
			onlyTwo = append(onlyTwo, ev)
		}
		if p == 2 || p == events.NoPartition {
			twoAndNone = append(twoAndNone, ev)
		}
	}
	two := events.NewPartitionSet(2)
	f := e.own()
	f.Partitions = &two
	e.checkSeen(e.collect(e.ctx, from, f, until(onlyTwo[len(onlyTwo)-1].ID)), onlyTwo)
	twoNone := events.NewPartitionSet(2, events.NoPartition)
	f.Partitions = &twoNone
	e.checkSeen(e.collect(e.ctx, from, f, until(twoAndNone[len(twoAndNone)-1].ID)), twoAndNone)
}

// testFilterProgress: a subscriber whose filter passes none of the last
// events still learns that the log was read past them: through reaches
// their position.
func testFilterProgress(e *env) {
	from := e.head()
	wanted := newEvent("Wanted" + randomHex(4))
	e.mustAppend(e.stream("w"), events.NoStream{}, wanted)
	var last events.AppendResult
	for range 5 {
		last = e.mustAppend(e.stream("other"), events.Any{}, newEvent("Other"+randomHex(2)))
	}
	f := events.Filter{Types: []string{wanted.Type}}
	var seen []events.Record
	err := e.log.Subscribe(e.ctx, from, f, func(recs []events.Record, through events.Position) error {
		seen = append(seen, recs...)
		if !through.Less(last.Position) {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		e.Fatalf("subscribe: %v; through never reached %s, the last event's position", err, last.Position)
	}
	e.checkSeen(seen, []events.Event{wanted})
}
