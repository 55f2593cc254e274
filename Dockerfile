# Multi-stage build: a static binary on a minimal base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /nftpolicy ./cmd/nftpolicy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /nftpolicy /nftpolicy
# NET_ADMIN is granted to the container, and the binary runs as root inside it so the capability is effective.
USER 0
ENTRYPOINT ["/nftpolicy"]
CMD ["run"]
