#!/usr/bin/env bash
# Regenerates proto/gen from proto/hookline/{v1,internal/v1}/*.proto with
# pinned plugins.
# Run from anywhere; `go generate ./proto` calls it.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)
bin="$root/.bin"
mkdir -p "$bin"

# Pinned plugin versions: change them here, and only here.
GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GEN_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
GEN_GW=github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@v2.33.0
GEN_OAPI=github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@v2.33.0

for p in "$GEN_GO" "$GEN_GRPC" "$GEN_GW" "$GEN_OAPI"; do
  name=${p%@*}; name=${name##*/}; ver=${p#*@}
  if [ ! -x "$bin/$name" ] || [ "$(cat "$bin/$name.version" 2>/dev/null)" != "$ver" ]; then
    GOBIN="$bin" go install "$p"
    echo "$ver" > "$bin/$name.version"
  fi
done
command -v protoc >/dev/null || { echo "generate.sh: protoc not found; install Debian's protobuf-compiler" >&2; exit 1; }

export PATH="$bin:$PATH"
rm -rf gen && mkdir -p gen
protoc -I . \
  --go_out=gen --go_opt=module=github.com/hookline/hookline/proto/gen \
  --go-grpc_out=gen --go-grpc_opt=module=github.com/hookline/hookline/proto/gen \
  hookline/v1/*.proto hookline/internal/v1/*.proto
if [ -f hookline/v1/gateway.yaml ]; then
  protoc -I . \
    --grpc-gateway_out=gen --grpc-gateway_opt=module=github.com/hookline/hookline/proto/gen \
    --grpc-gateway_opt=grpc_api_configuration=hookline/v1/gateway.yaml \
    --openapiv2_out=gen --openapiv2_opt=grpc_api_configuration=hookline/v1/gateway.yaml \
    --openapiv2_opt=allow_merge=true,merge_file_name=hookline,json_names_for_fields=false \
    hookline/v1/control.proto hookline/v1/console.proto hookline/v1/reconcile.proto
fi
