# syntax=docker/dockerfile:1
#
# One image for every target: the manifest picks the process with `--target=<t>` (gateway, auth,
# collections, media, social, webhooks; `all` when run bare). Production runs the JavaScript that
# `npm run build` emitted to dist/ with production dependencies only: no tsx, no TypeScript.
#
#   docker build -t cms:0.1.0 --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run --rm -p 8080:8080 -e HOST=0.0.0.0 cms:0.1.0            # all-in-one, embedded defaults
#
# The base is pinned to an exact Node 20 release on Debian bookworm slim (glibc: sharp's and the
# embedded PostgreSQL's prebuilt binaries need it). Pin its digest too when the registry is
# reachable: --build-arg NODE_IMAGE=node:20.20.2-bookworm-slim@sha256:<digest>.
ARG NODE_IMAGE=node:20.20.2-bookworm-slim

# 1. Build: every dependency, type-check and emit dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
RUN npm run build

# 2. Production dependencies only (the workspaces themselves come from dist/node_modules/@cms).
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --no-audit --no-fund

# 3. Runtime: node, production node_modules and dist/, owned by root and read-only to the
#    unprivileged user the process runs as (uid 1000, as the Kubernetes manifests expect).
FROM ${NODE_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="cms" \
      org.opencontainers.image.description="Collections and media API: one image, one process per --target (gateway, auth, collections, media, social, webhooks) or all-in-one" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="UNLICENSED" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    DATA_DIR=/tmp/cms
WORKDIR /app
COPY --from=deps /app/package.json /app/package-lock.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
USER 1000:1000
# 8080 gateway HTTP, 9090 service gRPC/Connect, 9464 Prometheus /metrics (when METRICS_PORT is set).
EXPOSE 8080 9090 9464
# A young generation of 2 x 32 MiB (V8's default here is 2 x 16): with dozens of requests in
# flight, objects of a request outlive the smaller one's scavenges and are copied, then promoted
# (bench/notes/overhead.md: collections.list 0.66-0.77 -> 0.84-1.00 of the bare page).
ENTRYPOINT ["node", "--enable-source-maps", "--max-semi-space-size=32", "dist/packages/server/src/main.js"]
CMD ["--target=all"]
