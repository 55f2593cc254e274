# Multi-stage build: a static binary on a minimal base.
# Both bases are arguments so that a machine without a registry builds it from images of its own
# (hack/e2e-kind.sh: GO_IMAGE is a Debian root filesystem with the machine's Go, RUNTIME_IMAGE is
# scratch, and the context carries vendor/ since the build stage reaches no module proxy).
ARG GO_IMAGE=golang:1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY . .
# With vendor/ in the context the modules come from it (-mod=vendor is Go's default then).
RUN if [ -f vendor/modules.txt ]; then echo "modules: vendor/"; else go mod download; fi
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /nftpolicy ./cmd/nftpolicy

FROM ${RUNTIME_IMAGE}
COPY --from=build /nftpolicy /nftpolicy
# NET_ADMIN is granted to the container, and the binary runs as root inside it so the capability is effective.
USER 0
ENTRYPOINT ["/nftpolicy"]
CMD ["run"]
