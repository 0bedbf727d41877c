# The controller image: a static binary on distroless, running as a non-root user.
#   docker build --build-arg VERSION=v0.1.0 -t llama-stack-controller:v0.1.0 .
# VERSION is reported in status.version.operatorVersion (`make image` passes the output
# of `git describe`; the build context has no .git to derive it from).

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so a source change does not download modules again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Set by BuildKit for the platform being built; empty means the build host's.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags="-s -w -X github.com/llamastack/llama-stack-controller/cmd/controller/app.version=${VERSION}" \
      -o /out/llama-stack-controller ./cmd/controller

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/llama-stack-controller /llama-stack-controller
USER 65532:65532
ENTRYPOINT ["/llama-stack-controller"]
