#!/usr/bin/env bash
# Runs @convlog/ag2b against the real AG2B built from its source.
#   AG2B_SRC=/path/to/ag2b ./run.sh     # a checkout of github.com/ag2b/ag2b
# Needs the workspace built first (cd js && npm ci && npm run build).
set -euo pipefail
cd "$(dirname "$0")"
: "${AG2B_SRC:?set AG2B_SRC to a checkout of github.com/ag2b/ag2b}"
[ -d node_modules ] || npm install --no-audit --no-fund --silent
rm -rf build && mkdir -p build/core
cp -r "$AG2B_SRC/packages/core/src" build/core/src
echo "AG2B: $(git -C "$AG2B_SRC" rev-parse --short HEAD 2>/dev/null || echo "$AG2B_SRC")"
node_modules/.bin/esbuild build/core/src/index.ts --bundle --format=esm --platform=node --external:zod \
  --tsconfig=tsconfig.bundle.json --log-level=warning --outfile=build/ag2b.mjs
# The plugin's types against AG2B's own: agent.use accepts convlogPlugin(...),
# and every TypeScript block of the package README compiles against them.
node readme-blocks.mjs ../packages/ag2b/README.md build
node_modules/.bin/tsc -p tsconfig.check.json
node real.mjs
