// Package archive keeps the log's records past its retention in object
// storage, as compressed, indexed segments, and reads them back.
//
// # Layout
//
// Before retention drops expiring streams (event and delivery streams), the
// log's backend hands their records to [Archive.Write]: whole streams, never
// part of one. Write puts one segment object, a zstd stream of
// ArchivedRecord messages each preceded by its length, under
//
//	segments/<first commit>-<last commit>-<random>.zst
//
// and then its index, an ArchiveIndex naming the streams it holds, under
//
//	index/<first commit>-<last commit>-<random>.idx
//
// An index is written last, so a segment without one (a crash between the
// two) is never read; the stream is archived again by the next retention
// pass, which finds it still in the log. A stream archived twice reads from
// the newest segment of those whose index a node has read (an index is
// read once, when a lookup first misses).
//
// # Reading
//
// [Archive.ReadStream] finds a stream through the indexes (loaded once,
// then the new ones on a miss, so a node reads what other nodes archived;
// [Archive.Throttled] lists them at most every five seconds),
// reads its segment whole and keeps the last few decoded. It is slower
// than the log, and meant for what the log no longer has: replays and
// reads older than retention.
//
// # Stores
//
// The bucket is a URL: file:///path in every build (a [Bucket] in a
// directory, with no dependency), and in a build with -tags cloudarchive
// (cmd/hookline imports package cloudblob; the Docker image is one)
// s3://bucket?region=…, gs://bucket, azblob://container, with credentials
// from each cloud's usual environment.
package archive

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

const (
	segmentPrefix = "segments/"
	indexPrefix   = "index/"
	// keptSegments is how many decoded segments ReadStream keeps.
	keptSegments = 4
	// maxRecord bounds one archived record's encoding.
	maxRecord = 8 << 20
)

// Archive is a bucket of segments. Safe for concurrent use.
type Archive struct {
	bucket Bucket
	where  string // the URL without its query, for messages
	log    *slog.Logger

	mu       sync.Mutex
	streams  map[string]place  // stream → its newest segment
	loaded   map[string]bool   // index objects read
	segments []string          // the segments they name
	indexOf  map[string]string // segment → its index object
	decoded  []decodedSegment  // the last segments read, newest last
	stats    Stats
	// refreshed is when a throttled lookup last listed the indexes (see
	// Throttled).
	refreshed time.Time
}

// refreshEvery bounds how often a throttled lookup that misses lists the
// bucket's indexes.
const refreshEvery = 5 * time.Second

// place is where a stream is archived.
type place struct {
	segment    string
	lastCommit uint64
}

type decodedSegment struct {
	name string
	recs []events.Record
}

// Stats counts what an archive holds, as its indexes say.
type Stats struct {
	Segments int
	Streams  int
	Records  int64
}

// Open opens the bucket at url (see the package documentation).
func Open(ctx context.Context, rawURL string, logger *slog.Logger) (*Archive, error) {
	where := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		u.RawQuery, u.User = "", nil
		where = u.String()
	}
	b, err := OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("archive %s: %w", where, err)
	}
	return New(b, where, logger), nil
}

// New is an archive in bucket; where names it in messages (a URL without
// credentials). The archive owns the bucket: Close closes it.
func New(bucket Bucket, where string, logger *slog.Logger) *Archive {
	if logger == nil {
		logger = slog.Default()
	}
	return &Archive{bucket: bucket, where: where, log: logger, streams: map[string]place{}, loaded: map[string]bool{}, indexOf: map[string]string{}}
}

// Close closes the bucket.
func (a *Archive) Close() error { return a.bucket.Close() }

// String names the archive without credentials.
func (a *Archive) String() string { return a.where }

// Archive implements [events.Archiver]: it writes recs as one segment.
func (a *Archive) Archive(ctx context.Context, recs []events.Record) error {
	return a.Write(ctx, recs)
}

// Write writes recs (whole streams) as one segment and its index. No
// records: nothing is written.
func (a *Archive) Write(ctx context.Context, recs []events.Record) error {
	_, err := a.write(ctx, recs)
	return err
}

// write writes recs as one segment and its index, and returns where.
func (a *Archive) write(ctx context.Context, recs []events.Record) (place, error) {
	if len(recs) == 0 {
		return place{}, nil
	}
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(x, y events.Record) int {
		switch {
		case x.Position.Less(y.Position):
			return -1
		case y.Position.Less(x.Position):
			return 1
		}
		return 0
	})
	var raw bytes.Buffer
	var streams []string
	seen := map[string]bool{}
	for i := range recs {
		b, err := proto.Marshal(archived(&recs[i]))
		if err != nil {
			return place{}, err
		}
		raw.Write(binary.AppendUvarint(nil, uint64(len(b))))
		raw.Write(b)
		if s := recs[i].Stream; !seen[s] {
			seen[s] = true
			streams = append(streams, s)
		}
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return place{}, err
	}
	compressed := enc.EncodeAll(raw.Bytes(), nil)
	_ = enc.Close()
	first, last := recs[0].Position.Commit, recs[len(recs)-1].Position.Commit
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails
	base := fmt.Sprintf("%020d-%020d-%s", first, last, hex.EncodeToString(suffix))
	segment := segmentPrefix + base + ".zst"
	if err := a.bucket.WriteAll(ctx, segment, compressed); err != nil {
		return place{}, fmt.Errorf("archive %s: write %s: %w", a.where, segment, err)
	}
	idx := &hooklinev1.ArchiveIndex{Segment: segment, Streams: streams, Records: int64(len(recs)),
		FirstCommit: first, LastCommit: last, WrittenAt: timestamppb.Now()}
	ib, err := proto.Marshal(idx)
	if err != nil {
		return place{}, err
	}
	index := indexPrefix + base + ".idx"
	if err := a.bucket.WriteAll(ctx, index, ib); err != nil {
		return place{}, fmt.Errorf("archive %s: write %s: %w", a.where, index, err)
	}
	a.mu.Lock()
	a.add(index, idx)
	a.mu.Unlock()
	a.log.Debug("segment archived", slog.String("segment", segment), slog.Int("streams", len(streams)), slog.Int("records", len(recs)),
		slog.Int("bytes", len(compressed)))
	return place{segment: segment, lastCommit: last}, nil
}

// add records an index's streams; a.mu is held.
func (a *Archive) add(name string, idx *hooklinev1.ArchiveIndex) {
	if a.loaded[name] {
		return
	}
	a.loaded[name] = true
	a.segments = append(a.segments, idx.GetSegment())
	a.indexOf[idx.GetSegment()] = name
	a.stats.Segments++
	a.stats.Records += idx.GetRecords()
	for _, s := range idx.GetStreams() {
		p, ok := a.streams[s]
		if !ok {
			a.stats.Streams++
		}
		if !ok || idx.GetLastCommit() >= p.lastCommit {
			a.streams[s] = place{segment: idx.GetSegment(), lastCommit: idx.GetLastCommit()}
		}
	}
}

// refresh reads the indexes not read yet.
func (a *Archive) refresh(ctx context.Context) error {
	var err error
	// A listing fails when an object it was about to describe is deleted
	// (a file bucket's listing stats each file): another node's purge.
	// The indexes read stay read; the listing starts over.
	for range listAttempts {
		if err = a.refreshOnce(ctx); !errors.Is(err, ErrNoObject) {
			return err
		}
	}
	return err
}

// listAttempts bounds refresh's listings when objects vanish under them.
const listAttempts = 5

func (a *Archive) refreshOnce(ctx context.Context) error {
	keys, err := a.bucket.List(ctx, indexPrefix)
	if err != nil {
		return fmt.Errorf("archive %s: list indexes: %w", a.where, err)
	}
	for _, key := range keys {
		a.mu.Lock()
		done := a.loaded[key]
		a.mu.Unlock()
		if done || !strings.HasSuffix(key, ".idx") {
			continue
		}
		b, err := a.bucket.ReadAll(ctx, key)
		if errors.Is(err, ErrNoObject) {
			continue // deleted since listed: a purge replaced it, and its new index was written first
		}
		if err != nil {
			return fmt.Errorf("archive %s: read %s: %w", a.where, key, err)
		}
		idx := &hooklinev1.ArchiveIndex{}
		if err := proto.Unmarshal(b, idx); err != nil {
			return fmt.Errorf("archive %s: index %s is damaged: %w", a.where, key, err)
		}
		a.mu.Lock()
		a.add(key, idx)
		a.mu.Unlock()
	}
	return nil
}

// reload reads the bucket's indexes again, all of them, and puts what
// they say in place of what a had read: after another node's purge
// deleted a segment this one had indexed. Lookups meanwhile see the old
// indexes, never none.
func (a *Archive) reload(ctx context.Context) error {
	fresh := &Archive{bucket: a.bucket, where: a.where, log: a.log, streams: map[string]place{}, loaded: map[string]bool{}, indexOf: map[string]string{}}
	if err := fresh.refresh(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.streams, a.loaded, a.segments, a.indexOf, a.stats = fresh.streams, fresh.loaded, fresh.segments, fresh.indexOf, fresh.stats
	a.decoded = nil
	return nil
}

// Stats counts the segments, streams and records the archive's indexes
// name, those other nodes wrote included.
func (a *Archive) Stats(ctx context.Context) (Stats, error) {
	if err := a.refresh(ctx); err != nil {
		return Stats{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats, nil
}

// Has reports whether the archive holds stream.
func (a *Archive) Has(ctx context.Context, stream string) (bool, error) {
	p, err := a.find(ctx, stream, false)
	return p.segment != "", err
}

// find returns where stream is archived; a zero place when nowhere. A
// miss lists the indexes not read yet, unless throttle and a throttled
// miss listed them less than refreshEvery ago.
func (a *Archive) find(ctx context.Context, stream string, throttle bool) (place, error) {
	a.mu.Lock()
	p, ok := a.streams[stream]
	skip := throttle && !a.refreshed.IsZero() && time.Since(a.refreshed) < refreshEvery
	if !ok && throttle && !skip {
		a.refreshed = time.Now()
	}
	a.mu.Unlock()
	if ok || skip {
		return p, nil
	}
	if err := a.refresh(ctx); err != nil {
		return place{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.streams[stream], nil
}

// ReadStream returns the archived records of stream in revision order, or
// fails with [events.ErrStreamNotFound] when the archive does not hold it.
func (a *Archive) ReadStream(ctx context.Context, stream string) ([]events.Record, error) {
	return a.readStream(ctx, stream, false)
}

// Throttled is the archive for reads anybody may ask for (the control
// API's): a miss lists the bucket's indexes at most every five seconds,
// so that reads of made-up event ids cannot list the bucket each. The
// grains read through the archive itself: a delivery's event must be found
// as soon as any node archived it.
func (a *Archive) Throttled() events.StreamArchive { return throttled{a} }

type throttled struct{ a *Archive }

func (t throttled) ReadStream(ctx context.Context, stream string) ([]events.Record, error) {
	return t.a.readStream(ctx, stream, true)
}

func (a *Archive) readStream(ctx context.Context, stream string, throttle bool) ([]events.Record, error) {
	p, err := a.find(ctx, stream, throttle)
	if err != nil {
		return nil, err
	}
	if p.segment == "" {
		return nil, fmt.Errorf("archive %s: %s: %w", a.where, stream, events.ErrStreamNotFound)
	}
	recs, err := a.segment(ctx, p.segment)
	if errors.Is(err, ErrNoObject) {
		// Another node's purge replaced the segment since this one read
		// its index: read every index again, once.
		if err := a.reload(ctx); err != nil {
			return nil, err
		}
		if p, err = a.find(ctx, stream, false); err != nil {
			return nil, err
		}
		if p.segment == "" {
			return nil, fmt.Errorf("archive %s: %s: %w", a.where, stream, events.ErrStreamNotFound)
		}
		recs, err = a.segment(ctx, p.segment)
	}
	if err != nil {
		return nil, err
	}
	var out []events.Record
	for _, r := range recs {
		if r.Stream == stream {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y events.Record) int { return cmp.Compare(x.Revision, y.Revision) })
	return out, nil
}

// segment returns a segment's records, decoded.
func (a *Archive) segment(ctx context.Context, name string) ([]events.Record, error) {
	a.mu.Lock()
	for _, d := range a.decoded {
		if d.name == name {
			a.mu.Unlock()
			return d.recs, nil
		}
	}
	a.mu.Unlock()
	b, err := a.bucket.ReadAll(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("archive %s: read %s: %w", a.where, name, err)
	}
	recs, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("archive %s: segment %s is damaged: %w", a.where, name, err)
	}
	a.mu.Lock()
	a.decoded = append(a.decoded, decodedSegment{name: name, recs: recs})
	if len(a.decoded) > keptSegments {
		a.decoded = a.decoded[1:]
	}
	a.mu.Unlock()
	return recs, nil
}

// decode reads a segment's records.
func decode(compressed []byte) ([]events.Record, error) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	raw, err := dec.DecodeAll(compressed, nil)
	if err != nil {
		return nil, err
	}
	var out []events.Record
	for len(raw) > 0 {
		n, k := binary.Uvarint(raw)
		if k <= 0 || n > maxRecord || uint64(len(raw)-k) < n {
			return nil, errors.New("a record's length is cut or out of bounds")
		}
		var m hooklinev1.ArchivedRecord
		if err := proto.Unmarshal(raw[k:k+int(n)], &m); err != nil {
			return nil, err
		}
		raw = raw[k+int(n):]
		r, err := record(&m)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func archived(r *events.Record) *hooklinev1.ArchivedRecord {
	return &hooklinev1.ArchivedRecord{
		Stream: r.Stream, Revision: uint64(r.Revision), Commit: r.Position.Commit, Prepare: r.Position.Prepare,
		Id: r.ID[:], Type: r.Type, Data: r.Data, Metadata: r.Metadata, Recorded: timestamppb.New(r.Recorded),
		Partition: uint32(r.Partition),
	}
}

func record(m *hooklinev1.ArchivedRecord) (events.Record, error) {
	id, err := uuid.FromBytes(m.GetId())
	if err != nil {
		return events.Record{}, err
	}
	return events.Record{
		Stream: m.GetStream(), Revision: events.Revision(m.GetRevision()),
		Position: events.Position{Commit: m.GetCommit(), Prepare: m.GetPrepare()}, ID: id, Type: m.GetType(),
		Data: m.GetData(), Metadata: m.GetMetadata(), Recorded: m.GetRecorded().AsTime().In(time.UTC),
		Partition: events.Partition(m.GetPartition()),
	}, nil
}

// Each calls fn with every record of every indexed segment (copies a
// newer segment superseded included), segment by segment: for audits and
// tests of what the archive holds (it reads the whole bucket).
func (a *Archive) Each(ctx context.Context, fn func(events.Record) error) error {
	if err := a.refresh(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	segments := slices.Clone(a.segments)
	a.mu.Unlock()
	for _, name := range segments {
		recs, err := a.segment(ctx, name)
		if errors.Is(err, ErrNoObject) {
			continue // a purge replaced it since its index was read
		}
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Purge removes from the archive every stream for which drop, given the
// stream's records, says so (a tenant's own retention, shorter than the
// log's): each segment holding one is written anew without it (a new
// segment and index), then its old index and the old segment are deleted.
// It returns how many streams it removed. One node at a time should purge
// a bucket.
func (a *Archive) Purge(ctx context.Context, drop func(stream string, recs []events.Record) bool) (int, error) {
	if err := a.refresh(ctx); err != nil {
		return 0, err
	}
	a.mu.Lock()
	segments := slices.Clone(a.segments)
	a.mu.Unlock()
	removed := 0
	for _, seg := range segments {
		recs, err := a.segment(ctx, seg)
		if err != nil {
			return removed, err
		}
		byStream := map[string][]events.Record{}
		for _, r := range recs {
			byStream[r.Stream] = append(byStream[r.Stream], r)
		}
		gone := map[string]bool{}
		for stream, rs := range byStream {
			if drop(stream, rs) {
				gone[stream] = true
			}
		}
		if len(gone) == 0 {
			continue
		}
		var keep []events.Record
		for _, r := range recs {
			if !gone[r.Stream] {
				keep = append(keep, r)
			}
		}
		now, err := a.write(ctx, keep)
		if err != nil {
			return removed, err
		}
		if err := a.forget(ctx, seg, len(recs), gone, now); err != nil {
			return removed, err
		}
		removed += len(gone)
	}
	return removed, nil
}

// forget deletes a segment and its index, which Purge replaced with now,
// and the streams it removed from memory; the streams it kept that were
// found in seg are found in now (whose last commit may be older than
// seg's, when a removed stream held the newest records).
func (a *Archive) forget(ctx context.Context, seg string, records int, gone map[string]bool, now place) error {
	a.mu.Lock()
	index := a.indexOf[seg]
	a.mu.Unlock()
	for _, key := range []string{index, seg} { // the index first: a segment without one is never read
		if key == "" {
			continue
		}
		if err := a.bucket.Delete(ctx, key); err != nil && !errors.Is(err, ErrNoObject) {
			return fmt.Errorf("archive %s: delete %s: %w", a.where, key, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for stream, p := range a.streams {
		switch {
		case p.segment != seg:
		case gone[stream]:
			delete(a.streams, stream)
			a.stats.Streams--
		default:
			a.streams[stream] = now
		}
	}
	a.segments = slices.DeleteFunc(a.segments, func(s string) bool { return s == seg })
	a.decoded = slices.DeleteFunc(a.decoded, func(d decodedSegment) bool { return d.name == seg })
	delete(a.indexOf, seg)
	a.stats.Segments--
	a.stats.Records -= int64(records)
	return nil
}
