# The one image of Tollgate: `serve` (proxy), `operator`, `simulate`. Built in three stages: the
# TypeScript compiled to JavaScript (npm run build: dist/ with the migrations and the .proto),
# the production dependencies alone, and a runtime that holds only those two and bin/, runs as
# a numeric non-root user (so runAsNonRoot can be verified) and writes nothing to its root
# filesystem. test/operator/package-layout.test.ts builds and runs this same layout without a
# container engine.
#
# The base: Node 24 LTS, the exact version the test suite also runs on (npm run test:node24,
# test/support/node24.ts; a test keeps the two equal). NOT PINNED BY DIGEST YET: no container
# registry is reachable from the machines this repository is developed and tested on, so the
# digest cannot be read or checked here, and one copied from elsewhere could name another
# build or a single platform. Where a registry is reachable, read the multi-platform index
# digest and build with it (README, Kubernetes > Installing > The image):
#   docker buildx imagetools inspect node:24.21.0-bookworm-slim --format '{{json .Manifest.Digest}}'
#   docker build --build-arg NODE_IMAGE=node:24.21.0-bookworm-slim@sha256:<digest> -t tollgate:0.1.0 .
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

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
