#!/usr/bin/env bash
# Installs what the on-chain adapter tests need (test-only, nothing of it ships):
# ganache (a local EVM node), solc-js, the published OpenZeppelin and Uniswap v3 packages and
# the Token Lists schema, pinned by package-lock.json; plus the @chainlink/contracts tarball
# unpacked without its dependencies (they include a git dependency no registry serves).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -d node_modules/ganache ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
fi
CHAINLINK=@chainlink/contracts@1.5.0
if [ ! -f vendor/chainlink/package.json ]; then
  rm -rf vendor && mkdir -p vendor/chainlink
  tarball=$(npm pack "$CHAINLINK" --pack-destination vendor --loglevel=error | tail -1)
  tar xzf "vendor/$tarball" -C vendor/chainlink --strip-components=1
  rm -f "vendor/$tarball"
fi
echo "tests/evm: ganache $(node -p 'require("./node_modules/ganache/package.json").version'), chainlink $(node -p 'require("./vendor/chainlink/package.json").version')"
