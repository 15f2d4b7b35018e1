# The one image of Tollgate: `serve` (proxy), `operator`, `simulate`. Built in three stages: the
# TypeScript compiled to JavaScript (npm run build: dist/ with the migrations and the .proto),
# the production dependencies alone, and a runtime that holds only those two and bin/, runs as
# a numeric non-root user (so runAsNonRoot can be verified) and writes nothing to its root
# filesystem. test/operator/package-layout.test.ts builds and runs this same layout without a
# container engine.
#
# The base: Node 24 LTS, the exact version the test suite also runs on (npm run test:node24,
# test/support/node24.ts; a test keeps the two equal), pinned by the digest of the tag's
# multi-platform index, so a re-pushed tag cannot change what is built. No registry is reachable
# from the machines this repository is developed on: the digest was not read from Docker Hub
# here but taken, in November 2026, from the Dockerfiles and lock notes of several unrelated
# public projects that pin node:24.21.0-bookworm-slim (and node:24-slim of the same days) to it.
# Check it, and refresh it with the next Node 24 release, where a registry is reachable:
#   docker buildx imagetools inspect node:24.21.0-bookworm-slim --format '{{json .Manifest.Digest}}'
ARG NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:0e0ff40c39bc087845bfb27465a0df4ea419520094bc35842ff83dd8cbe6f9b6

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY kernel ./kernel
COPY api ./api
COPY cli ./cli
COPY operator ./operator
COPY proxy ./proxy
COPY simulator ./simulator
COPY examples/quickstart ./examples/quickstart
COPY console ./console
RUN npm run build -- /out/dist

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY --from=build /out/dist ./dist
# Numeric, so the kubelet can check runAsNonRoot; the chart's podSecurityContext uses the same.
USER 10001:10001
# API, admin, operator gRPC, operator metrics
EXPOSE 8080 9090 50051 9091
# Node is PID 1 and the gateway handles SIGTERM itself (stop accepting, finish streams, hand
# credit leases back); no shell in between to swallow the signal.
ENTRYPOINT ["node", "bin/tollgate.js"]
CMD ["--help"]
