# syntax=docker/dockerfile:1
# The juneau image: one static binary for every role (controller, webhook, node agent,
# CNI plugin), on a small Debian so the node DaemonSet's init containers have a shell,
# awk and ip(8) to install the CNI plugin and set the agent's sysctls.
#
#   docker build -t ghcr.io/loutres/juneau:latest --build-arg VERSION=$(git describe --tags --always --dirty) .
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 ... (the Go
# build cross-compiles on the build machine's platform).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/juneau ./cmd/juneau

FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends iproute2 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/juneau /usr/local/bin/juneau
# The controller and webhook run as this user; the node DaemonSet sets uid 0 itself.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/juneau"]
