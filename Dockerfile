# syntax=docker/dockerfile:1
# Upshift server image (Hummingbird 2, talks to PostgreSQL via DATABASE_URL).
# It cannot be built on the development machines (no Docker engine there);
# CI validates only docker-compose.yml (docker-compose config -q).

# ---- build ----
FROM swift:6.3.1-bookworm AS build
# compress-nio links against zlib.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
# Manifest first so the dependency layer is reused until it changes.
# "Package.resolve[d]" is a glob: COPY still works when the git-ignored
# Package.resolved is absent; when present, pin exactly to it.
COPY Package.swift Package.resolve[d] ./
RUN swift package resolve $([ -f Package.resolved ] && echo --force-resolved-versions || true)
# SwiftPM checks every target's folder, test targets included, so Tests/ is needed too.
COPY Sources ./Sources
COPY Tests ./Tests
COPY sql ./sql
COPY docs/openapi.yaml ./docs/openapi.yaml
COPY scripts/embed-files ./scripts/embed-files
RUN swift build -c release --product upshift --static-swift-stdlib \
    && install -D "$(swift build -c release --show-bin-path)/upshift" /staging/upshift

# ---- runtime ----
FROM debian:bookworm-slim
# No curl: the compose healthcheck probes HTTP with bash's /dev/tcp instead.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates tzdata zlib1g \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --user-group --no-create-home --home-dir /app --shell /usr/sbin/nologin upshift
COPY --from=build /staging/upshift /usr/local/bin/upshift
# The binary carries the migrations of sql/ and docs/openapi.yaml (the EmbedFiles plugin compiles them in).
ENV UPSHIFT_HOST=0.0.0.0 UPSHIFT_PORT=8080
WORKDIR /app
USER upshift:upshift
EXPOSE 8080
ENTRYPOINT ["upshift"]
CMD ["serve"]
