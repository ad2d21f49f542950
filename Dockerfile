# Plantgate in a container: `make docker` builds it, compose.yaml runs it
# beside Redis. The final image holds the static binary and the bundled
# plugins only, and runs as a non-root user.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# make docker passes git describe / git rev-parse: .git stays out of the
# build context (.dockerignore).
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/plantgate/plantgate/host/buildinfo.version=${VERSION} -X github.com/plantgate/plantgate/host/buildinfo.revision=${REVISION}" \
      -o /out/plantgate ./cmd/plantgate \
 && mkdir -p /out/plugins \
 && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o /out/plugins/10-bearer-auth.wasm ./plugins/bearer-auth \
 && cp plugins/bearer-auth/10-bearer-auth.json /out/plugins/ \
 && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o /out/plugins/20-plant-rules.wasm ./plugins/plant-rules

# distroless static: no shell, no package manager; user nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/plantgate /usr/local/bin/plantgate
# The bundled chain; mount a directory over /plugins to run your own.
COPY --from=build /out/plugins /plugins
ENV PLANTGATE_LISTEN=0.0.0.0:8080 \
    PLANTGATE_PLUGINS=/plugins \
    PLANTGATE_LOG_FORMAT=json
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/plantgate"]
CMD ["serve"]
