package control

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hookline/hookline/proto"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// maxRESTBody caps a REST request body: a batch of events at their cap and
// their JSON envelope.
const maxRESTBody = 64 << 20

// Handler returns the REST API over conn, a client connection to this
// node's gRPC server (so that REST calls pass the same authentication): the
// paths of gateway.yaml, the OpenAPI document at /openapi.json, and health
// at /healthz. JSON uses the proto field names.
func (s *Server) Handler(ctx context.Context, conn *grpc.ClientConn) (http.Handler, error) {
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true},
			UnmarshalOptions: protojson.UnmarshalOptions{},
		}),
	)
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		controlv1.RegisterTenantServiceHandler,
		controlv1.RegisterEndpointServiceHandler,
		controlv1.RegisterEventServiceHandler,
		controlv1.RegisterDeliveryServiceHandler,
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
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("POST /v1/events", rawData(gw, false))
	mux.Handle("POST /v1/events/batch", rawData(gw, true))
	mux.Handle("/", gw)
	return http.MaxBytesHandler(mux, maxRESTBody), nil
}

// rawData keeps the exact bytes of a REST publish's JSON "data" value: the
// gateway would parse it into a google.protobuf.Value and lose number
// precision and key order, so it is moved, compacted, into "payload" before
// the gateway sees the request.
func rawData(next http.Handler, batch bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, `{"code":3,"message":"request body: `+jsonEscape(err.Error())+`"}`, http.StatusRequestEntityTooLarge)
			return
		}
		if out, err := moveData(body, batch); err == nil {
			body = out
		} // otherwise the gateway reports the malformed JSON itself
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

func moveData(body []byte, batch bool) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	if !batch {
		if err := moveOne(obj); err != nil {
			return nil, err
		}
		return json.Marshal(obj)
	}
	var evs []map[string]json.RawMessage
	if raw, ok := obj["events"]; ok {
		if err := json.Unmarshal(raw, &evs); err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if err := moveOne(ev); err != nil {
				return nil, err
			}
		}
		raw, err := json.Marshal(evs)
		if err != nil {
			return nil, err
		}
		obj["events"] = raw
	}
	return json.Marshal(obj)
}

func moveOne(obj map[string]json.RawMessage) error {
	data, ok := obj["data"]
	if !ok {
		return nil
	}
	if _, has := obj["payload"]; has {
		return nil // let validation name the conflict
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return err
	}
	enc, err := json.Marshal(base64.StdEncoding.EncodeToString(buf.Bytes()))
	if err != nil {
		return err
	}
	delete(obj, "data")
	obj["payload"] = enc
	return nil
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
