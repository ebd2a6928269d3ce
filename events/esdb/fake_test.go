package esdb_test

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/shared"
	api "github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v1/streams"
	v2errors "github.com/kurrent-io/KurrentDB-Client-Go/protos/kurrentdb/protocols/v2/streams/errors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeServer answers the client's v1 Streams calls the way a KurrentDB node
// does in the cases that the error translation must handle. The stream name
// picks the answer:
//
//	tenant-wrong-<n>    append: wrong expected version, current revision n
//	tenant-wrong-none   append: wrong expected version, no stream
//	tenant-conflict-<n> append: a v2 StreamRevisionConflict status detail
//	tenant-large        append: InvalidArgument "Maximum Append Size ..."
//	tenant-deleted      append: the stream-deleted trailer
//	tenant-broken       append: Internal
//	tenant-idem-<n>     append: success at revision n with no position;
//	                    read: one event at revision n, position 70/60
//	tenant-missing      read: stream not found
//	anything else       append: success at revision 4, position 100/90;
//	                    read: no events
//
// It records the streams appended to, in order.
//
// Subscriptions to $all replay subs: the i-th subscription sends the events
// of subs[i] and then drops with Unavailable, or, past the end of subs,
// waits for the client to go. Each subscription's start position is sent
// to from (0/0 for the start).
type fakeServer struct {
	api.UnimplementedStreamsServer
	appends chan string

	subs [][]fakeEvent
	from chan [2]uint64
	n    atomic.Int32
}

// fakeEvent is an event of a fake subscription.
type fakeEvent struct {
	stream, typ string
	pos         uint64
}

// startFake serves a fakeServer with the given subscriptions on loopback
// until the test ends and returns it and its connection string.
func startFake(t *testing.T, subs ...[]fakeEvent) (*fakeServer, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	fake := &fakeServer{appends: make(chan string, 100), from: make(chan [2]uint64, 100)}
	fake.subs = subs
	api.RegisterStreamsServer(srv, fake)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return fake, "kurrentdb://" + lis.Addr().String() + "?tls=false"
}

func (f *fakeServer) Append(s grpc.ClientStreamingServer[api.AppendReq, api.AppendResp]) error {
	var stream string
	for {
		req, err := s.Recv()
		if err != nil {
			break // io.EOF: the client closed its side
		}
		if o := req.GetOptions(); o != nil {
			stream = string(o.GetStreamIdentifier().GetStreamName())
		}
	}
	f.appends <- stream
	wrong := func(current *api.AppendResp_WrongExpectedVersion) error {
		current.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
		return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: current}})
	}
	switch {
	case stream == "tenant-wrong-none":
		return wrong(&api.AppendResp_WrongExpectedVersion{
			CurrentRevisionOption: &api.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}})
	case strings.HasPrefix(stream, "tenant-wrong-"):
		n, _ := strconv.ParseUint(strings.TrimPrefix(stream, "tenant-wrong-"), 10, 64)
		return wrong(&api.AppendResp_WrongExpectedVersion{
			CurrentRevisionOption: &api.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: n}})
	case strings.HasPrefix(stream, "tenant-conflict-"):
		n, _ := strconv.ParseInt(strings.TrimPrefix(stream, "tenant-conflict-"), 10, 64)
		st, err := status.New(codes.FailedPrecondition, "conflict").WithDetails(&v2errors.StreamRevisionConflictErrorDetails{
			Stream: stream, ExpectedRevision: -1, ActualRevision: n})
		if err != nil {
			return err
		}
		return st.Err()
	case stream == "tenant-large":
		s.SetTrailer(metadata.Pairs("exception", "maximum-append-size-exceeded", "maximum-append-size", "1048576"))
		return status.Error(codes.InvalidArgument, "Maximum Append Size of 1048576 Exceeded.")
	case stream == "tenant-deleted":
		s.SetTrailer(metadata.Pairs("exception", "stream-deleted", "stream-name", stream))
		return status.Error(codes.FailedPrecondition, "Event stream 'tenant-deleted' is deleted.")
	case stream == "tenant-broken":
		return status.Error(codes.Internal, "boom")
	case strings.HasPrefix(stream, "tenant-idem-"):
		n, _ := strconv.ParseUint(strings.TrimPrefix(stream, "tenant-idem-"), 10, 64)
		return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
			CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: n},
			PositionOption:        &api.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}},
		}}})
	}
	return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
		CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: 4},
		PositionOption:        &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{CommitPosition: 100, PreparePosition: 90}},
	}}})
}

func (f *fakeServer) Read(req *api.ReadReq, s grpc.ServerStreamingServer[api.ReadResp]) error {
	if req.GetOptions().GetSubscription() != nil {
		return f.subscribe(req, s)
	}
	o, ok := req.GetOptions().GetStreamOption().(*api.ReadReq_Options_Stream)
	if !ok {
		return nil // $all: an empty log
	}
	id := o.Stream.GetStreamIdentifier()
	stream := string(id.GetStreamName())
	switch {
	case stream == "tenant-missing":
		return s.Send(&api.ReadResp{Content: &api.ReadResp_StreamNotFound_{StreamNotFound: &api.ReadResp_StreamNotFound{StreamIdentifier: id}}})
	case strings.HasPrefix(stream, "tenant-idem-"):
		n, _ := strconv.ParseUint(strings.TrimPrefix(stream, "tenant-idem-"), 10, 64)
		return s.Send(&api.ReadResp{Content: &api.ReadResp_Event{Event: &api.ReadResp_ReadEvent{
			Event: &api.ReadResp_ReadEvent_RecordedEvent{
				Id:               &shared.UUID{Value: &shared.UUID_String_{String_: uuid.NewString()}},
				StreamIdentifier: id,
				StreamRevision:   n,
				CommitPosition:   70,
				PreparePosition:  60,
				Metadata:         map[string]string{"type": "TenantCreated", "content-type": "application/octet-stream", "created": "0"},
			},
		}}})
	}
	return nil
}

func (f *fakeServer) subscribe(req *api.ReadReq, s grpc.ServerStreamingServer[api.ReadResp]) error {
	p := req.GetOptions().GetAll().GetPosition()
	f.from <- [2]uint64{p.GetCommitPosition(), p.GetPreparePosition()}
	if err := s.Send(&api.ReadResp{Content: &api.ReadResp_Confirmation{Confirmation: &api.ReadResp_SubscriptionConfirmation{SubscriptionId: "fake"}}}); err != nil {
		return err
	}
	i := int(f.n.Add(1)) - 1
	if i >= len(f.subs) {
		<-s.Context().Done()
		return nil
	}
	for _, ev := range f.subs[i] {
		err := s.Send(&api.ReadResp{Content: &api.ReadResp_Event{Event: &api.ReadResp_ReadEvent{
			Event: &api.ReadResp_ReadEvent_RecordedEvent{
				Id:               &shared.UUID{Value: &shared.UUID_String_{String_: uuid.NewString()}},
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(ev.stream)},
				CommitPosition:   ev.pos,
				PreparePosition:  ev.pos,
				Metadata:         map[string]string{"type": ev.typ, "content-type": "application/octet-stream", "created": "0"},
			},
		}}})
		if err != nil {
			return err
		}
	}
	return status.Error(codes.Unavailable, "node going down")
}
