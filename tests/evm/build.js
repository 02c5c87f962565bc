// Compiles the contracts the on-chain tests deploy with solc-js (the compiler as an npm
// package) and writes {Name: {abi, bytecode}} as JSON. Test-only; run by tests/chain/evm.py.
//   node build.js OUT.json CHAINLINK_PACKAGE_DIR
// Sources: contracts/*.sol here, OpenZeppelin from node_modules, and Chainlink's aggregator
// interfaces from the unpacked @chainlink/contracts tarball (npm pack, no dependencies: its
// dependency tree pulls a git repository that no registry serves).
"use strict";
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const [out, chainlinkDir] = process.argv.slice(2);
const here = __dirname;
const sources = {};
for (const name of fs.readdirSync(path.join(here, "contracts"))) {
  if (name.endsWith(".sol")) {
    sources[`contracts/${name}`] = { content: fs.readFileSync(path.join(here, "contracts", name), "utf8") };
  }
}

function findImports(importPath) {
  const roots = [path.join(here, "node_modules", importPath)];
  if (importPath.startsWith("@chainlink/contracts/")) {
    roots.unshift(path.join(chainlinkDir, importPath.slice("@chainlink/contracts/".length)));
  }
  for (const candidate of roots) {
    if (fs.existsSync(candidate)) return { contents: fs.readFileSync(candidate, "utf8") };
  }
  return { error: `not found: ${importPath}` };
}

const input = {
  language: "Solidity",
  sources,
  settings: {
    // ganache 7 runs Shanghai; solc 0.8.24 would otherwise target Cancun opcodes.
    evmVersion: "shanghai",
    // Optimizer off: compiles in a third of the time and the tests measure no gas.
    optimizer: { enabled: false },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const wanted = ["TestToken", "TestVault", "TestVaultV2", "TransparentUpgradeableProxy", "TimelockController", "TestAggregator"];
const result = {};
for (const file of Object.values(output.contracts)) {
  for (const [name, c] of Object.entries(file)) {
    if (wanted.includes(name)) result[name] = { abi: c.abi, bytecode: "0x" + c.evm.bytecode.object };
  }
}
fs.writeFileSync(out, JSON.stringify(result));
console.log(`compiled ${Object.keys(result).length} contracts to ${out}`);
