# The vod image: one image for the API/media/DRM host (`serve`, the default), the processing
# workers (`worker`) and the migrations (`migrate`). Deploying it on Cloud Run: docs/deploy-gcp.md.
#
#   docker build -t vod .
#   docker run --rm -p 8080:8080 vod            # vod serve
#   docker run --rm vod worker                  # vod worker (needs VOD_DATABASE_URL)
#   docker run --rm vod migrate                 # vod migrate
#
# Base: the Node 24 LTS line on Debian 12 (bookworm), by tag and not by digest. The major version
# and the Debian release are what the build depends on (the engines field asks for Node 24, the
# prebuilt native argon2 binding, Debian's ffmpeg 5.1 that the media adapter is tested against);
# patch releases of both bring security fixes, which a rebuild should pick up rather than a digest
# freeze out. A deployment is still reproducible: it runs the image by its digest in the registry,
# not by this tag.

# ---- build: install everything, compile, then keep only what the runtime loads ----
FROM node:24-bookworm-slim AS build
WORKDIR /app
# The whole source (see .dockerignore): npm ci needs every workspace's package.json that the
# lockfile names, and listing them here one by one would break on each new adapter.
COPY . .
RUN npm ci --no-audit --no-fund
# The host and the packages it references (core, http, the clients, adapters); tests, contract
# suites, examples and benchmarks are not compiled. Then the player's bundle, which the media app
# serves at /v1/player.js (esbuild, a dev dependency: built here, before pruning).
RUN npx tsc -b hosts/express && node clients/player/build.mjs
# The runtime needs core, http, the clients (the player bundle among them), the adapters and the
# host. The other workspaces (contract-tests,
# test-services, examples, bench) are dropped from the workspace list before pruning, so that their own
# dependencies (testcontainers, vitest, ...) leave with the dev dependencies. The ffmpeg/ffprobe
# installer packages (optional, ~140 MB, a 2018 build) are removed too: untrusted uploads are
# decoded by Debian's ffmpeg, which VOD_FFMPEG_PATH / VOD_FFPROBE_PATH below name; a path set
# that does not exist stops the start rather than falling back. A workspace keeps its own
# node_modules where npm nested a version the root's cannot be (ipaddr.js 2 beside express's 1).
RUN node -e "const fs=require('fs');const p=JSON.parse(fs.readFileSync('package.json','utf8'));p.workspaces=['core','http','clients/*','adapters/*','hosts/*'];fs.writeFileSync('package.json',JSON.stringify(p,null,2)+'\n')" \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/@ffmpeg-installer node_modules/@ffprobe-installer \
 && find node_modules -maxdepth 1 -type d -empty -delete \
 && mkdir /out \
 && cp -a package.json node_modules /out/ \
 && for ws in core http clients/* adapters/* hosts/*; do \
      mkdir -p "/out/$ws" && cp -a "$ws/package.json" "$ws/dist" "/out/$ws/" \
      && if [ -d "$ws/node_modules" ]; then cp -a "$ws/node_modules" "/out/$ws/"; fi; \
    done \
 && find /out -name '*.tsbuildinfo' -delete \
 && node -e "require('fs').accessSync('/out/node_modules/shaka-packager/bin/packager-linux-'+process.arch, require('fs').constants.X_OK)"

# ---- runtime ----
FROM node:24-bookworm-slim AS runtime
# ffmpeg/ffprobe from Debian; tini as PID 1, so that ffmpeg and packager children that outlive a
# killed run are reaped and SIGTERM reaches node, which drains (vod serve) or finishes its jobs
# (vod worker) before it exits.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ffmpeg tini \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/vod \
 && chown node:node /var/lib/vod
ENV NODE_ENV=production \
    VOD_DATA_DIR=/var/lib/vod \
    VOD_FFMPEG_PATH=/usr/bin/ffmpeg \
    VOD_FFPROBE_PATH=/usr/bin/ffprobe
WORKDIR /app
# Owned by root and not writable by the process: only VOD_DATA_DIR (and the OS temp directory,
# where processing keeps its scratch files) are.
COPY --from=build /out /app
# Non-root: the `node` user (uid 1000) of the base image.
USER node
# Cloud Run sets PORT (8080 unless configured otherwise); the host binds 0.0.0.0:PORT.
EXPOSE 8080
# No HEALTHCHECK: Cloud Run does not use it; it probes GET /healthz as the service definition
# says (deploy/gcp/api.service.yaml).
# --max-semi-space-size: V8's young generation may grow to 32 MiB semispaces: an API request's
# garbage dies young, and fewer scavenges cost less CPU per request (docs/decisions.md). Node 24's
# V8 grows them that far by itself (Node 20's stopped at 16); the flag keeps it so whatever a later
# V8 picks. A startup-only flag: bin/vod.ts cannot set it at run time.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--max-semi-space-size=32", "hosts/express/dist/bin/vod.js"]
CMD ["serve"]
