# Runtime images of function-kilomesh and provider-kilomesh, for building with
# Docker. Each is one static binary on an empty base, run as the non-root
# user 65532 and labelled with its version, like the images the Docker-free
# build assembles (see docs/development.md). Root owns every file and alone
# may write it, so the process cannot rewrite its own binary. The binaries
# carry Go's fallback CA roots: the images need no CA bundle.
#
#   docker build --target function -t function-kilomesh .
#   docker build --target provider -t provider-kilomesh .
#
# Cross-build with buildx: --platform linux/amd64,linux/arm64.

ARG GO_VERSION=1.26
# The version the images are labelled with (package/build.sh's VERSION).
ARG VERSION=v0.0.0-dev

# The module and the sources both binaries are built from.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY fn/ fn/
COPY provider/ provider/
ENV CGO_ENABLED=0

FROM source AS build-function
ARG TARGETOS
ARG TARGETARCH
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/function-kilomesh ./fn && \
  chmod 0755 /out/function-kilomesh && mkdir -m 1777 /out/tmp

FROM source AS build-provider
ARG TARGETOS
ARG TARGETARCH
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/provider-kilomesh ./provider/cmd/provider && \
  chmod 0755 /out/provider-kilomesh && mkdir -m 1777 /out/tmp

# function-kilomesh serves gRPC on :9443; Crossplane passes its TLS
# certificates in TLS_SERVER_CERTS_DIR.
FROM scratch AS function
ARG VERSION
LABEL org.opencontainers.image.version=$VERSION org.opencontainers.image.title=function-kilomesh
COPY --from=build-function --chown=0:0 /out/function-kilomesh /usr/local/bin/function-kilomesh
COPY --from=build-function --chown=0:0 /out/tmp /tmp
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
EXPOSE 9443
ENTRYPOINT ["/usr/local/bin/function-kilomesh"]

# provider-kilomesh serves metrics on :8080 and health probes on :8081.
FROM scratch AS provider
ARG VERSION
LABEL org.opencontainers.image.version=$VERSION org.opencontainers.image.title=provider-kilomesh
COPY --from=build-provider --chown=0:0 /out/provider-kilomesh /usr/local/bin/provider-kilomesh
COPY --from=build-provider --chown=0:0 /out/tmp /tmp
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/provider-kilomesh"]
