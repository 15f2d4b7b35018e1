# The one image of Tollgate: `serve` (proxy), `operator`, `simulate`. It runs the TypeScript
# sources through tsx (a runtime dependency), so the image holds no build step to drift from.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY kernel ./kernel
COPY api ./api
COPY cli ./cli
COPY operator ./operator
COPY proxy ./proxy
COPY simulator ./simulator
COPY console ./console
COPY crds ./crds
COPY examples ./examples
COPY tsconfig.json ./
USER node
# API, admin, operator gRPC, operator metrics
EXPOSE 8080 9090 50051 9091
ENTRYPOINT ["node", "bin/tollgate.js"]
CMD ["--help"]
