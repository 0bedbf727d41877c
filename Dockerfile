# The controller image for those who build with a container engine. `make image` builds
# the same image from Go alone (hack/image): reproducible, both platforms in one index,
# no engine needed. Here hack/image writes the same files (the static binary, the CA
# certificates, the nonroot user) and they are copied onto scratch.
#   docker build --build-arg VERSION=v0.1.0 -t llama-stack-controller:v0.1.0 .
# VERSION is reported in status.version.operatorVersion and `--version` (`make build`
# stamps the output of `git describe`; the build context has no .git to derive it from).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so a source change does not download modules again.
COPY go.mod go.sum ./
COPY hack/image/go.mod hack/image/go.sum hack/image/
RUN go mod download && go -C hack/image mod download
COPY . .
# Set by BuildKit for the platform being built; empty means the build host's.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=
RUN go -C hack/image run . -root /src -version "${VERSION}" \
      -platforms "${TARGETOS:-linux}/${TARGETARCH:-$(go env GOARCH)}" -rootfs /rootfs

FROM scratch
ARG VERSION=
LABEL org.opencontainers.image.version=${VERSION}
COPY --from=build /rootfs/ /
COPY --from=build --chown=65532:65532 /rootfs/home/nonroot/ /home/nonroot/
USER 65532:65532
ENTRYPOINT ["/llama-stack-controller"]
