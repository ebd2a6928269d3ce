package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hookline/hookline/proto"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// maxOtherBody caps the body of every REST route but publishing: the
// largest endpoint settings (100 event types, 50 metadata entries, a
// 2 KiB URL) with JSON's escapes fit.
const maxOtherBody = 256 << 10

// Handler returns the REST API over conn, a client connection to this
// node's gRPC server (so that REST calls pass the same authentication): the
// paths of gateway.yaml, the OpenAPI document at /openapi.json, and health
// at /healthz (503 until the node is ready, see Ready). JSON uses the proto
// field names.
//
// Every other request is authenticated from its Authorization header
// before its body is read, and answered 401 at once without it. Then it
// must fit the limits of calls in flight (429 for the caller's, 503 for the
// node's) and its route's body cap, which a declared Content-Length over
// it meets with 413 at once: one publish's payload in base64 and its
// envelope for POST /v1/events, a batch's (Config.MaxMessage) for POST
// /v1/events/batch, 256 KiB elsewhere. Parse errors name the field.
func (s *Server) Handler(ctx context.Context, conn *grpc.ClientConn) (http.Handler, error) {
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true},
			UnmarshalOptions: protojson.UnmarshalOptions{},
		}),
		runtime.WithErrorHandler(func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			if isErased(err) {
				w = goneWriter{w}
			}
			runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, explainREST(ctx, r, err))
		}),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
	)
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		controlv1.RegisterTenantServiceHandler,
		controlv1.RegisterEndpointServiceHandler,
		controlv1.RegisterEventServiceHandler,
		controlv1.RegisterEventTypeServiceHandler,
		controlv1.RegisterDeliveryServiceHandler,
		controlv1.RegisterPortalServiceHandler,
		controlv1.RegisterOperatorServiceHandler,
		controlv1.RegisterAuditServiceHandler,
		controlv1.RegisterEndpointHealthServiceHandler,
		controlv1.RegisterReconcileServiceHandler,
	} {
		if err := register(ctx, gw, conn); err != nil {
			return nil, fmt.Errorf("register gateway: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(proto.OpenAPI)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-s.ready:
			_, _ = io.WriteString(w, "ok\n")
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "catching up with the log\n")
		}
	})
	mux.Handle("POST /v1/events", s.guard(s.publishBodyCap(false), rawData(gw, false)))
	mux.Handle("POST /v1/events/batch", s.guard(s.publishBodyCap(true), rawData(gw, true)))
	mux.Handle("/", s.guard(maxOtherBody, gw))
	return mux, nil
}

// incomingHeader passes the W3C Trace Context headers of a REST call on
// to the gRPC call as they are (a publish's producer trace context, see
// traceOf), and the others as the gateway does by default.
func incomingHeader(key string) (string, bool) {
	switch k := strings.ToLower(key); k {
	case "traceparent", "tracestate":
		return k, true
	}
	return runtime.DefaultHeaderMatcher(key)
}

// publishBodyCap is the body cap of a REST publish: its payload in base64
// (4/3 of the bytes) and 64 KiB of envelope for one event; for a batch,
// the largest gRPC message in base64 and 1 MiB of JSON framing.
func (s *Server) publishBodyCap(batch bool) int64 {
	if batch {
		return int64(s.cfg.MaxMessage)/3*4 + 1<<20
	}
	return int64(s.cfg.MaxPayload)/3*4 + 64<<10
}

// guard authenticates a REST request from its headers, admits it under
// the limits, and reads its body, at most limit bytes, before next sees
// it. Refusals are answered at once, in the gateway's JSON error shape,
// and close the connection when the client has a body left to send.
func (s *Server) guard(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.awaitReady(r.Context()); err != nil {
			refuse(w, err)
			return
		}
		c, err := s.restLimits.authenticate(func() (Caller, error) {
			return s.callerFromToken(bearer(r.Header.Values("Authorization")...))
		})
		if err != nil {
			refuse(w, err)
			return
		}
		release, err := s.restLimits.acquire(c)
		if err != nil {
			refuse(w, err)
			return
		}
		defer release()
		if r.ContentLength > limit {
			refuse(w, tooLarge(r, limit))
			return
		}
		reserve := r.ContentLength
		if reserve < 0 {
			reserve = limit // chunked: the most it may be
		}
		free, err := s.restLimits.reserveBody(reserve)
		if err != nil {
			refuse(w, err)
			return
		}
		defer free()
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			refuse(w, tooLarge(r, limit))
			return
		case err != nil:
			// The client went away or was too slow (the server's read
			// timeout): there is no one to answer.
			refuse(w, status.Errorf(codes.InvalidArgument, "body: cannot be read: %v", err))
			return
		}
		r.Body = newRESTBody(body)
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

func tooLarge(r *http.Request, limit int64) error {
	return &httpError{status: http.StatusRequestEntityTooLarge, code: codes.InvalidArgument,
		msg: fmt.Sprintf("body: is over the %d-byte limit of %s %s; send less (a batch: fewer events)", limit, r.Method, r.URL.Path)}
}

// httpError is a refusal with its own HTTP status, where the gateway's
// mapping of the code would say otherwise (413 is INVALID_ARGUMENT's 400
// there).
type httpError struct {
	status int
	code   codes.Code
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// refuse answers a request that is refused before the gateway sees it,
// in the gateway's JSON error shape: {"code":…,"message":…,"details":[]}.
func refuse(w http.ResponseWriter, err error) {
	httpStatus, code, msg := http.StatusInternalServerError, codes.Internal, err.Error()
	var he *httpError
	if errors.As(err, &he) {
		httpStatus, code, msg = he.status, he.code, he.msg
	} else if st, ok := status.FromError(err); ok {
		httpStatus, code, msg = runtime.HTTPStatusFromCode(st.Code()), st.Code(), st.Message()
	}
	switch code {
	case codes.ResourceExhausted, codes.Unavailable:
		w.Header().Set("Retry-After", "1")
	}
	// Whatever of the body the client still sends is not read: close the
	// connection rather than let the server drain it.
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	b, _ := json.Marshal(map[string]any{"code": int(code), "message": msg, "details": []any{}})
	_, _ = w.Write(b)
}

// rawData keeps the exact bytes of a REST publish's JSON "data" value: the
// gateway would parse it into a google.protobuf.Value and lose number
// precision and key order, so it is moved, compacted, into "payload" before
// the gateway sees the request. guard has read and capped the body.
func rawData(next http.Handler, batch bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			refuse(w, status.Errorf(codes.InvalidArgument, "body: cannot be read: %v", err))
			return
		}
		if out, err := moveData(body, batch); err == nil {
			body = out
		} // otherwise the gateway reports the malformed JSON itself
		r.Body = newRESTBody(body)
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}
