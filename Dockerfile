# syntax=docker/dockerfile:1.7
# The one Sluice image: the `sluice` binary (operator, webhook, node agent, CLI) on a distroless base, as non-root.
#   docker build -t ghcr.io/sluice-dev/sluice:0.1.0 .

# Build stage: the toolchain rust-toolchain.toml pins is installed by rustup on the first cargo call.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    CARGO_INCREMENTAL=0 cargo build --release --locked --bin sluice \
    && install -D -m 0755 target/release/sluice /out/sluice

# Runtime stage: glibc and libgcc only (the node agent dlopens the driver's libnvidia-ml, which the NVIDIA
# container runtime or a host mount provides); no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/sluice /sluice
USER 65532:65532
ENTRYPOINT ["/sluice"]
CMD ["--help"]
